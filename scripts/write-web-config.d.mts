/** The web-config.json document for azd's provisioning outputs; throws naming what is missing. */
export function webConfigFromOutputs(env: Readonly<Record<string, string | undefined>>): unknown;
