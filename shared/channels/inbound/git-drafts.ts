import type { Octokit } from "@octokit/rest";
import { loadOctokit } from "../../lazy-sdks.js";

/**
 * The `/svc` write commands' draft pull requests (issue 26; spec operator-console.md §5 A3 table
 * rows 3–4, ledger C-419, C-420, C-422, C-423). Where a Git host is configured
 * (`SVC_GIT_HOST_API_URL`, `SVC_GIT_REPOSITORY`, `SVC_GIT_TOKEN_REF`), a drafted change becomes a
 * DRAFT pull request through the host's REST API with `@octokit/rest` (GitHub or GitHub Enterprise
 * Server wire format):
 *
 * 0. `GET /repos/{owner}/{repo}/pulls?head={owner}:svc/<kind>/<draft id>&state=all` — a pull
 *    request a previous attempt of the same turn opened is answered as is (the draft id comes
 *    from the turn, so a retried turn never opens a second one);
 * 1. `GET /repos/{owner}/{repo}/git/ref/heads/{base}` — the base branch's head commit;
 * 2. `POST /repos/{owner}/{repo}/git/refs` — a new branch `svc/<kind>/<draft id>` at that commit
 *    (422 "already exists": a previous attempt made it; then the file is looked up with `GET contents`);
 * 3. `PUT /repos/{owner}/{repo}/contents/proposals/svc/<kind>/<draft id>.json` on that branch — the
 *    proposal file only (never a live catalog file), committed with the invoker's object id as
 *    the commit trailer (`Requested-by: <oid>`);
 * 4. `POST /repos/{owner}/{repo}/pulls` with `draft: true`.
 *
 * The token (a secret reference resolved on use, inside the 20 s limit) is cached with the client;
 * an `http_401` drops both and the exchange is tried once more with the token read again (a token
 * rotated in Key Vault works without a restart). The token is sent only to the configured API origin:
 * redirects are refused (a redirect would carry the token elsewhere), there are no client retries,
 * nothing is logged, and a failure is reported by a fixed reason (`http_<status>`, `unreachable`,
 * `timeout`) — never the host's message or the request, which could name the token.
 */

/** The Git host's settings (docs/channels.md "Draft pull requests"). */
export interface GitHostSettings {
  /** The REST API's base URL: `https://api.github.com` or `https://<host>/api/v3`. */
  readonly apiUrl: string;
  readonly owner: string;
  readonly repo: string;
  /** Secret reference to the token (`kv:<name>`, or locally `env:<VARIABLE>`). */
  readonly tokenRef: string;
  /** The branch the pull request targets (default `main`). */
  readonly baseBranch: string;
}

/** The drafted change as the proposal file carries it. */
export interface DraftProposal {
  draft_id: string;
  kind: string;
  summary: string;
  params: Record<string, string>;
  /** The proposal's trailer: names the invoker's object id (`Requested-by: <oid>`). */
  trailer: string;
  requested_by: string;
  created_at: string;
  approval_id?: string;
}

/** The draft pull request a proposal became. */
export interface DraftPullRequest {
  number: number;
  url: string;
  branch: string;
  path: string;
  /** The host's `draft` flag as it answered. */
  draft: boolean;
}

export type GitDraftOutcome =
  | { status: "opened"; pull_request: DraftPullRequest }
  | { status: "failed"; reason: string; branch: string };

/** The whole exchange (four requests) must finish within this. */
export const GIT_HOST_TIMEOUT_MS = 20_000;

/** Where a proposal goes: its own branch and a file under `proposals/svc/` (never a catalog). */
export function proposalLocation(draft: Pick<DraftProposal, "kind" | "draft_id">): { branch: string; path: string } {
  return {
    branch: `svc/${draft.kind}/${draft.draft_id}`,
    path: `proposals/svc/${draft.kind}/${draft.draft_id}.json`,
  };
}

/** The commit message: a subject, the summary, then the trailer (git's `Key: value` last paragraph). */
export function proposalCommitMessage(draft: DraftProposal): string {
  return `svc: ${draft.summary} (${draft.draft_id})\n\nDrafted from a chat channel with /svc; it changes nothing until it is reviewed and merged.\n\n${draft.trailer}\n`;
}

function reasonOf(error: unknown): string {
  const status = (error as { status?: unknown }).status;
  const name = (error as { name?: unknown }).name;
  // @octokit/request keeps fetch's own error as the cause (a DOMException `TimeoutError` for AbortSignal.timeout).
  const cause = (error as { cause?: { name?: unknown } }).cause?.name;
  if (name === "AbortError" || name === "TimeoutError" || cause === "TimeoutError" || cause === "AbortError")
    return "timeout";
  // @octokit/request reports a transport failure (refused connection, refused redirect) as status 500.
  if (typeof status === "number" && status !== 500) return `http_${status}`;
  if (typeof status === "number" && (error as { response?: unknown }).response !== undefined) return "http_500";
  return "unreachable";
}

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * Builds the publisher: `publish(draft)` opens the draft pull request and answers what happened;
 * it never throws (a Git host failure leaves the draft record and the user is told).
 */
export function createGitDraftPublisher(options: {
  settings: GitHostSettings;
  token: () => Promise<string>;
  /** The whole exchange's limit (default {@link GIT_HOST_TIMEOUT_MS}). */
  timeoutMs?: number;
}) {
  const { settings } = options;
  let client: Promise<Octokit> | undefined;
  const clientOf = () => {
    client ??= Promise.all([loadOctokit(), options.token()]).then(
      ([{ Octokit }, token]) =>
        new Octokit({
          auth: token,
          baseUrl: settings.apiUrl.replace(/\/+$/, ""),
          userAgent: "blastplane-svc-drafts",
          log: quiet,
          // A redirect would carry the Authorization header to where the answer points: refused.
          request: { redirect: "error", log: quiet },
        }),
      (error: unknown) => {
        client = undefined;
        throw error;
      },
    );
    return client;
  };

  /** Settles with `promise`, or rejects with the signal's reason once it aborts. */
  const within = <V>(promise: Promise<V>, signal: AbortSignal): Promise<V> =>
    new Promise<V>((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      const onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
    });

  const statusOf = (error: unknown) => (error as { status?: unknown }).status;

  async function exchange(draft: DraftProposal, signal: AbortSignal): Promise<GitDraftOutcome> {
    const { branch, path } = proposalLocation(draft);
    const owner = settings.owner;
    const repo = settings.repo;
    // The token is read inside the exchange's limit.
    const octokit = await within(clientOf(), signal);
    const opened = (data: { number?: unknown; html_url?: unknown; draft?: unknown }): GitDraftOutcome => {
      const url = typeof data.html_url === "string" && URL.canParse(data.html_url) ? data.html_url : "";
      if (typeof data.number !== "number") return { status: "failed", reason: "malformed_answer", branch };
      return {
        status: "opened",
        pull_request: { number: data.number, url: url.slice(0, 500), branch, path, draft: data.draft === true },
      };
    };
    // A retried turn (the same draft id, so the same branch) finds what its first attempt made.
    const existing = await octokit.rest.pulls.list({
      owner,
      repo,
      head: `${owner}:${branch}`,
      state: "all",
      per_page: 1,
      request: { signal },
    });
    const found = Array.isArray(existing.data) ? existing.data[0] : undefined;
    if (found) return opened(found);
    const base = await octokit.rest.git.getRef({
      owner,
      repo,
      ref: `heads/${settings.baseBranch}`,
      request: { signal },
    });
    let branchExisted = false;
    try {
      await octokit.rest.git.createRef({
        owner,
        repo,
        ref: `refs/heads/${branch}`,
        sha: base.data.object.sha,
        request: { signal },
      });
    } catch (error) {
      // 422 "Reference already exists": a previous attempt made the branch.
      if (statusOf(error) !== 422) throw error;
      branchExisted = true;
    }
    let fileExists = false;
    if (branchExisted)
      try {
        await octokit.rest.repos.getContent({ owner, repo, path, ref: branch, request: { signal } });
        fileExists = true;
      } catch (error) {
        if (statusOf(error) !== 404) throw error;
      }
    if (!fileExists) {
      const proposal = { ...draft, proposal_version: 1 };
      await octokit.rest.repos.createOrUpdateFileContents({
        owner,
        repo,
        path,
        branch,
        message: proposalCommitMessage(draft),
        content: Buffer.from(`${JSON.stringify(proposal, null, 2)}\n`, "utf8").toString("base64"),
        request: { signal },
      });
    }
    const pull = await octokit.rest.pulls.create({
      owner,
      repo,
      title: `[draft] ${draft.summary} (${draft.draft_id})`.slice(0, 200),
      head: branch,
      base: settings.baseBranch,
      body: `Drafted from a chat channel with \`/svc ${draft.summary}\`. It changes only \`${path}\`; nothing applies until a reviewer merges it.${draft.approval_id ? `\n\nA1 approval: ${draft.approval_id}` : ""}\n\n${draft.trailer}`,
      draft: true,
      request: { signal },
    });
    return opened(pull.data);
  }

  return async function publish(draft: DraftProposal): Promise<GitDraftOutcome> {
    const signal = AbortSignal.timeout(options.timeoutMs ?? GIT_HOST_TIMEOUT_MS);
    for (let attempt = 1; ; attempt++) {
      try {
        return await exchange(draft, signal);
      } catch (error) {
        const reason = reasonOf(error);
        // A token rotated in the secret store: the cached client is dropped and the token read
        // again, once (the exchange looks up what the first try made, so nothing is made twice).
        if (reason === "http_401" && attempt === 1) {
          client = undefined;
          continue;
        }
        return { status: "failed", reason, branch: proposalLocation(draft).branch };
      }
    }
  };
}

export type GitDraftPublisher = ReturnType<typeof createGitDraftPublisher>;
