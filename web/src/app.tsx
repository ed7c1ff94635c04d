import type { ComponentChildren } from "preact";
import { useContext } from "preact/hooks";
import { hasRoleAtLeast, type Role } from "../../shared/auth/roles.js";
import { ApiError, type ApiClient } from "./api.js";
import type { Auth } from "./auth.js";
import { ApiTokenPage } from "./pages/api-token-page.js";
import { ConsolePage } from "./pages/console-page.js";
import { ClusterPage } from "./pages/cluster-page.js";
import { DatabasesPage } from "./pages/databases-page.js";
import { DiagnosticsPage } from "./pages/diagnostics-page.js";
import { JobPage } from "./pages/job-page.js";
import { JobsPage } from "./pages/jobs-page.js";
import { SubmitPage } from "./pages/submit-page.js";
import { TerminalPage } from "./pages/terminal-page.js";
import { WorkspacePage } from "./pages/workspace-page.js";
import { Link, useLocation } from "./router.js";
import { ApiContext, AppContext, ErrorNotice, PageTitle, topRole, useApi, useAsync } from "./ui.js";

const NAV: readonly { href: string; label: string; match: (path: string) => boolean; floor?: Role }[] = [
  {
    href: "/blast/jobs",
    label: "Jobs",
    match: (p) => p === "/" || (p.startsWith("/blast/jobs") && p !== "/blast/new"),
  },
  // Hidden from Readers (the backend refuses their submits anyway).
  { href: "/blast/new", label: "New search", match: (p) => p === "/blast/new", floor: "Contributor" },
  { href: "/databases", label: "Databases", match: (p) => p === "/databases" },
  { href: "/console", label: "Console", match: (p) => p === "/console" },
  { href: "/workspace", label: "Workspace", match: (p) => p === "/workspace" },
  { href: "/cluster", label: "Cluster", match: (p) => p === "/cluster" },
  { href: "/settings/api-token", label: "API token", match: (p) => p === "/settings/api-token" },
  { href: "/diagnostics", label: "Diagnostics", match: (p) => p === "/diagnostics" },
  // Shown to everyone: a Reader opening it is told why there is none (decision 0020).
  { href: "/terminal", label: "Terminal", match: (p) => p === "/terminal" },
];

const JOB_PATH = /^\/blast\/jobs\/([^/]+)$/;

/** The whole app: sign-in when signed out, else the caller's session with the page for the URL. */
export function App(props: { auth: Auth; api: ApiClient }) {
  const { auth, api } = props;
  const path = useLocation().pathname;
  return (
    <ApiContext.Provider value={{ api, auth }}>
      {auth.account ? <Session auth={auth} api={api} path={path} /> : <SignedOut path={path} />}
    </ApiContext.Provider>
  );
}

function SignedOut(props: { path: string }) {
  const { auth } = useApi();
  return (
    <Frame path={props.path} signedIn={false}>
      {props.path === "/diagnostics" ? (
        <DiagnosticsPage />
      ) : (
        <section class="sign-in">
          <PageTitle subtitle="Run NCBI BLAST+ searches, on this machine or on an Azure Kubernetes cluster: prepare databases, submit searches and read their results.">
            Sign in to blastplane
          </PageTitle>
          <p>
            <button type="button" class="primary" onClick={() => void auth.signIn()}>
              Sign in
            </button>
          </p>
          <p class="hint">
            You sign in with your organisation's account; your role (Reader, Contributor, Approver or Owner) decides
            what you can do.
          </p>
        </section>
      )}
    </Frame>
  );
}

function Session(props: { auth: Auth; api: ApiClient; path: string }) {
  const { auth, api, path } = props;
  const me = useAsync((signal) => api.me(signal), []);
  if (!me.data) {
    return (
      <Frame path={path} signedIn={false}>
        {me.error ? (
          <ErrorNotice error={me.error} title="Could not load your session:">
            {me.error instanceof ApiError && me.error.status === 401 ? (
              <p>
                <button type="button" onClick={() => void auth.signIn()}>
                  Sign in again
                </button>
              </p>
            ) : null}
          </ErrorNotice>
        ) : (
          <p class="loading">Signing in…</p>
        )}
      </Frame>
    );
  }
  const caller = me.data.caller;
  return (
    <AppContext.Provider value={{ api, auth, caller }}>
      <Frame path={path} signedIn={true}>
        <Page path={path} />
      </Frame>
    </AppContext.Provider>
  );
}

function Page(props: { path: string }) {
  const { path } = props;
  if (path === "/" || path === "/blast/jobs") return <JobsPage />;
  if (path === "/blast/new") return <SubmitPage />;
  const job = JOB_PATH.exec(path);
  if (job?.[1]) return <JobPage key={job[1]} uuid={decodeURIComponent(job[1])} />;
  if (path === "/databases") return <DatabasesPage />;
  if (path === "/console") return <ConsolePage />;
  if (path === "/workspace") return <WorkspacePage />;
  if (path === "/cluster") return <ClusterPage />;
  if (path === "/settings/api-token") return <ApiTokenPage />;
  if (path === "/diagnostics") return <DiagnosticsPage />;
  if (path === "/terminal") return <TerminalPage />;
  return (
    <section>
      <PageTitle>Page not found</PageTitle>
      <p>
        There is no page at <code>{path}</code>. <Link href="/blast/jobs">Go to your jobs</Link>.
      </p>
    </section>
  );
}

/** Header (brand, navigation, who is signed in) and the main landmark. */
function Frame(props: { path: string; signedIn: boolean; children: ComponentChildren }) {
  const app = useContext(AppContext);
  const { auth } = useApi();
  return (
    <>
      <a class="skip-link" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <Link href="/" class="brand">
          blastplane
        </Link>
        {props.signedIn ? (
          <nav aria-label="Main">
            <ul>
              {NAV.filter((item) => !item.floor || (app && hasRoleAtLeast(app.caller.roles, item.floor))).map(
                (item) => (
                  <li key={item.href}>
                    <Link href={item.href} aria-current={item.match(props.path) ? "page" : undefined}>
                      {item.label}
                    </Link>
                  </li>
                ),
              )}
            </ul>
          </nav>
        ) : null}
        {app ? (
          <div class="who">
            <span class="who-name">{app.caller.name || app.caller.oid}</span>
            <span class="badge badge-role" title="Your role">
              {topRole(app.caller) ?? "no role"}
            </span>
            <button type="button" class="link-button" onClick={() => void auth.signOut()}>
              Sign out
            </button>
          </div>
        ) : null}
      </header>
      <main id="main" tabIndex={-1}>
        {props.children}
      </main>
    </>
  );
}
