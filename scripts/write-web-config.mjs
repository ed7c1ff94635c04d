// azd's postprovision hook: writes the web app's runtime configuration (/web-config.json) from the
// provisioning outputs azd puts in the environment, into web/public/ so the next build ships it.
// Plain JavaScript with no dependencies: it runs before anything is installed or built.
import { writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

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
  };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const target = path.join(root, "web/public/web-config.json");
    writeFileSync(target, `${JSON.stringify(webConfigFromOutputs(process.env), null, 2)}\n`);
    console.log(`wrote ${path.relative(root, target)}`);
  } catch (error) {
    console.error(`write-web-config: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  }
}
