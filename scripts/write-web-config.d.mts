/** The web-config.json document for azd's provisioning outputs; throws naming what is missing. */
export function webConfigFromOutputs(env: Readonly<Record<string, string | undefined>>): unknown;

/** The terminal's WebSocket URL (`wss://<TERMINAL_HOST>/v1/terminal`) or "" without a terminal ingress. */
export function terminalUrlFromOutputs(env: Readonly<Record<string, string | undefined>>): string;

/** The CSP with the terminal's wss:// origin added to connect-src (once). */
export function cspWithTerminal(csp: string, terminalUrl: string): string;
