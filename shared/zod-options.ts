/**
 * Parse options of a schema parsed once per process (the settings, a catalog at start): without
 * zod's compiled fast path for objects, which costs far more to generate than one parse saves.
 */
export const ONE_OFF_PARSE = { jitless: true } as const;
