// azd's postprovision hook: writes the web app's runtime configuration (/web-config.json) from the
// provisioning outputs azd puts in the environment, into web/public/ so the next build ships it;
// with a terminal ingress (TERMINAL_HOST, decision 0022) also its wss:// origin into the CSP.
// Plain JavaScript with no dependencies: it runs before anything is installed or built.
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/**
 * The browser terminal's WebSocket URL for the ingress host `TERMINAL_HOST` (decision 0022), or ""
 * when the deployment has no terminal ingress; throws when the host is not a DNS name.
 */
export function terminalUrlFromOutputs(env) {
  const host = (env.TERMINAL_HOST ?? "").trim().toLowerCase();
  if (!host) return "";
  if (host.length > 253 || !/^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/.test(host))
    throw new Error("TERMINAL_HOST must be a DNS name such as terminal.example.org");
  return `wss://${host}/v1/terminal`;
}

/** The Static Web App's CSP with the terminal's WebSocket origin added to `connect-src` (once). */
export function cspWithTerminal(csp, terminalUrl) {
  if (!terminalUrl) return csp;
  const origin = `wss://${new URL(terminalUrl).host}`;
  return csp
    .split(";")
    .map((directive) => {
      const parts = directive.trim().split(/\s+/);
      if (parts[0] !== "connect-src" || parts.includes(origin)) return directive;
      return ` ${[...parts, origin].join(" ")}`;
    })
    .join(";")
    .trim();
}

/** The web-config.json document for these provisioning outputs; throws naming what is missing. */
export function webConfigFromOutputs(env) {
  const missing = ["AUTH_TENANT_ID", "AUTH_CLIENT_ID", "API_BASE_URL"].filter((name) => !env[name]);
  if (missing.length > 0) throw new Error(`missing provisioning outputs: ${missing.join(", ")} (run azd provision)`);
  if (!/^[0-9a-f-]{36}$/i.test(env.AUTH_TENANT_ID)) throw new Error("AUTH_TENANT_ID must be a tenant GUID");
  if (!env.API_BASE_URL.startsWith("https://")) throw new Error("API_BASE_URL must be an https URL");
  return {
    auth: {
      // The SPA may sign in as its own app registration (WEB_CLIENT_ID) or as the API's.
      client_id: env.WEB_CLIENT_ID || env.AUTH_CLIENT_ID,
      authority: `https://login.microsoftonline.com/${env.AUTH_TENANT_ID}`,
      scopes: [`api://${env.AUTH_CLIENT_ID}/user_impersonation`],
      protocol_mode: "AAD",
      known_authorities: [],
      authority_metadata: null,
    },
    api_base_url: env.API_BASE_URL.replace(/\/+$/, ""),
    terminal_url: terminalUrlFromOutputs(env),
  };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const target = path.join(root, "web/public/web-config.json");
    const config = webConfigFromOutputs(process.env);
    writeFileSync(target, `${JSON.stringify(config, null, 2)}\n`);
    console.log(`wrote ${path.relative(root, target)}`);
    // The page may open the terminal's WebSocket only if the Static Web App's CSP names its origin.
    const swaFile = path.join(root, "web/public/staticwebapp.config.json");
    const swa = JSON.parse(readFileSync(swaFile, "utf8"));
    const csp = swa.globalHeaders["content-security-policy"];
    const widened = cspWithTerminal(csp, config.terminal_url);
    if (widened !== csp) {
      swa.globalHeaders["content-security-policy"] = widened;
      writeFileSync(swaFile, `${JSON.stringify(swa, null, 2)}\n`);
      console.log(`added ${new URL(config.terminal_url).host} to connect-src in ${path.relative(root, swaFile)}`);
    }
  } catch (error) {
    console.error(`write-web-config: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  }
}
