/**
 * Database names: no path separators, no leading dot, at most 64 characters. In a module of its own
 * (no Node imports) so the request schemas that use it also bundle into the web app.
 */
export const DATABASE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
