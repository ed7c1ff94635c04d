import type { ComponentType } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import type { ApiClient } from "../api.js";
import type { Auth } from "../auth.js";
import { ErrorNotice, PageTitle, useApp, useCan } from "../ui.js";

type View = ComponentType<{ api: ApiClient; auth: Auth; terminalUrl: string }>;

/** The browser terminal (Contributor and above; Readers are told why there is none). */
export function TerminalPage() {
  const { api, auth } = useApp();
  const allowed = useCan("Contributor");
  const [View, setView] = useState<View | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const mounted = useRef(true);
  useEffect(() => {
    mounted.current = true;
    if (allowed && api.terminalUrl)
      import("../terminal/terminal-view.js").then(
        (m) => mounted.current && setView(() => m.default),
        (e: unknown) => mounted.current && setError(e),
      );
    return () => {
      mounted.current = false;
    };
  }, [allowed]);
  return (
    <section>
      <PageTitle subtitle="A shell beside the cluster with kubectl: read pods, logs and jobs of the blastplane namespace, exec into shard pods. Sessions are audited (who, when, bytes), never what you type.">
        Terminal
      </PageTitle>
      {!allowed ? (
        <p class="notice" role="alert">
          The terminal needs the Contributor role or higher. Readers have no terminal: ask an Owner for Contributor.
        </p>
      ) : !api.terminalUrl ? (
        <p class="notice">This deployment has no terminal (no terminal_url in the web app's configuration).</p>
      ) : error ? (
        <ErrorNotice error={error} title="The terminal could not load:" />
      ) : View ? (
        <View api={api} auth={auth} terminalUrl={api.terminalUrl} />
      ) : (
        <p class="loading">Loading the terminal…</p>
      )}
    </section>
  );
}
