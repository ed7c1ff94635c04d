import { render } from "preact";
import { createApiClient } from "./api.js";
import { App } from "./app.js";
import { createAuth } from "./auth.js";
import { loadWebConfig } from "./config.js";
import "./styles.css";

/** Loads the runtime configuration, completes a sign-in redirect if there is one, then renders. */
async function boot(): Promise<void> {
  const root = document.getElementById("app");
  if (!root) return;
  try {
    const config = await loadWebConfig();
    const auth = await createAuth(config.auth);
    const api = createApiClient({
      baseUrl: config.api_base_url,
      accessToken: () => auth.accessToken(),
      terminalUrl: config.terminal_url,
    });
    root.textContent = "";
    render(<App auth={auth} api={api} />, root);
  } catch (error) {
    root.textContent = "";
    render(
      <main class="boot-error">
        <h1>blastplane could not start</h1>
        <p role="alert">{error instanceof Error ? error.message : String(error)}</p>
        <p>
          <a href="/">Try again</a>
        </p>
      </main>,
      root,
    );
  }
}

void boot();
