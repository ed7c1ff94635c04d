import { describe, expect, it } from "vitest";
import { loadJobApiConfig } from "../../jobapi/config.js";
import { createJobApiTransport } from "../../jobapi/http.js";
import { createTerminalRoutes } from "../../jobapi/routes/terminal-routes.js";
import { loadTerminalDaemonConfig } from "../../jobapi/terminal/daemon-config.js";
import { ConfigError } from "../../shared/config/env.js";
import { createLogger } from "../../shared/logging/logger.js";
import { originOf } from "../../shared/terminal/terminal-ticket-service.js";

const STORAGE = { JOBAPI_STORAGE_CONNECTION_STRING: "UseDevelopmentStorage=true" };

describe("the terminal's settings", () => {
  it("leave the terminal off (no validator) without the dashboard's app registration", () => {
    expect(loadJobApiConfig(STORAGE).terminal.auth).toBeUndefined();
    expect(loadJobApiConfig({ ...STORAGE, JOBAPI_AUTH_CLIENT_ID: "c" }).terminal.auth).toBeUndefined();
    expect(
      loadJobApiConfig({ ...STORAGE, JOBAPI_AUTH_CLIENT_ID: "c", JOBAPI_AUTH_TENANT_ID: "t" }).terminal.auth,
    ).toEqual({
      clientId: "c",
      discoveryUrl: "https://login.microsoftonline.com/t/v2.0/.well-known/openid-configuration",
    });
  });

  it("take exact origins and refuse anything with a path or another scheme", () => {
    const config = loadJobApiConfig({
      ...STORAGE,
      JOBAPI_TERMINAL_ALLOWED_ORIGINS: "https://blast.example.org, http://127.0.0.1:4280",
    });
    expect(config.terminal.allowedOrigins).toEqual(["https://blast.example.org", "http://127.0.0.1:4280"]);
    for (const bad of ["https://blast.example.org/app", "ftp://x.example", "not a url"]) {
      expect(() => loadJobApiConfig({ ...STORAGE, JOBAPI_TERMINAL_ALLOWED_ORIGINS: bad }), bad).toThrow(ConfigError);
    }
  });

  it("B-174 the daemon's address is not a setting: only its port is", () => {
    const config = loadTerminalDaemonConfig({
      JOBAPI_TERMINAL_DAEMON_PORT: "7700",
      JOBAPI_TERMINAL_DAEMON_HOST: "0.0.0.0",
    });
    expect(config.port).toBe(7700);
    expect(Object.keys(config)).not.toContain("host");
    expect(loadTerminalDaemonConfig({}).port).toBe(7681);
  });

  it("give the shell only an allow-list of the daemon's environment", () => {
    const config = loadTerminalDaemonConfig({
      PATH: "/usr/bin",
      KUBECONFIG: "/etc/terminal/kubeconfig",
      JOBAPI_STORAGE_CONNECTION_STRING: "AccountKey=secret",
      AZURE_CLIENT_ID: "x",
    });
    expect(config.shellEnv).toMatchObject({
      PATH: "/usr/bin",
      KUBECONFIG: "/etc/terminal/kubeconfig",
      TERM: "xterm-256color",
    });
    expect(Object.keys(config.shellEnv)).not.toContain("JOBAPI_STORAGE_CONNECTION_STRING");
    expect(Object.keys(config.shellEnv)).not.toContain("AZURE_CLIENT_ID");
  });
});

describe("origins of ticket requests", () => {
  it("accept scheme://host[:port] only", () => {
    expect(originOf("https://blast.example.org")).toBe("https://blast.example.org");
    expect(originOf("http://127.0.0.1:4280")).toBe("http://127.0.0.1:4280");
    for (const bad of [null, undefined, "", "null", "https://a.example/x", "file:///etc", "javascript:alert(1)"]) {
      expect(originOf(bad), String(bad)).toBeUndefined();
    }
  });
});

describe("GET /v1/terminal without an upgrade", () => {
  it("answers 426 in the error envelope", async () => {
    const app = createJobApiTransport({
      routes: createTerminalRoutes(),
      logger: createLogger({ level: "error" }),
      authorize: async () => false,
      bodyLimitBytes: 1024,
    });
    const res = await app.request("/v1/terminal");
    expect(res.status).toBe(426);
    expect(res.headers.get("upgrade")).toBe("websocket");
    expect(await res.json()).toEqual({ detail: expect.any(String), request_id: res.headers.get("x-request-id") });
  });
});
