import { createHash } from "node:crypto";
import http from "node:http";
import { type FakeServer, serve } from "./notify-vendors.js";

/**
 * A local server speaking GitHub's REST wire format (GitHub Enterprise Server's `/api/v3` prefix
 * accepted) for the calls a draft pull request needs, over an in-memory repository, so the real
 * `@octokit/rest` client is tested:
 *
 * - `GET /repos/{owner}/{repo}/git/ref/heads/{branch}` → `{ref, node_id, url, object: {sha, type, url}}`, 404 when absent;
 * - `POST /repos/{owner}/{repo}/git/refs` `{ref, sha}` → 201, 422 `Reference already exists`;
 * - `PUT /repos/{owner}/{repo}/contents/{path}` `{message, content (base64), branch, sha?}` → 201
 *   `{content, commit}`: a new commit on the branch with the file; 409 when the branch is absent;
 * - `POST /repos/{owner}/{repo}/pulls` `{title, head, base, body, draft}` → 201 `{number, html_url, draft, state, head, base}`;
 * - `GET /repos/{owner}/{repo}/pulls?head={owner}:{branch}&state=all` → 200, the pulls of that head (maybe `[]`);
 * - `GET /repos/{owner}/{repo}/contents/{path}?ref={branch}` → 200 `{type: "file", path, sha, content}`, 404 when absent.
 *
 * A request without `Authorization: token <token>` (or `Bearer`) is 401 `Bad credentials`;
 * {@link GitHostFake.rotateToken} changes the token the host accepts (a rotation).
 */

export interface FakeCommit {
  sha: string;
  parent: string;
  message: string;
  /** The files this commit changed: path → UTF-8 content. */
  changed: Record<string, string>;
}

export interface FakePull {
  number: number;
  title: string;
  head: string;
  base: string;
  body: string;
  draft: boolean;
}

export interface GitHostFake extends FakeServer {
  owner: string;
  repo: string;
  /** Branch → head commit sha. */
  refs: Map<string, string>;
  commits: Map<string, FakeCommit>;
  pulls: FakePull[];
  /** The files of a branch (every commit from the root), path → content. */
  filesOf(branch: string): Record<string, string>;
  /** From now on only `token` is accepted. */
  rotateToken(token: string): void;
}

const sha1 = (text: string) => createHash("sha1").update(text).digest("hex");

export async function startGitHostFake(options: {
  token: string;
  owner?: string;
  repo?: string;
  /** The base branch's files (the live catalog). */
  files?: Record<string, string>;
}): Promise<GitHostFake> {
  const owner = options.owner ?? "contoso";
  const repo = options.repo ?? "blastplane-config";
  const root: FakeCommit = { sha: sha1("root"), parent: "", message: "initial", changed: { ...options.files } };
  const commits = new Map<string, FakeCommit>([[root.sha, root]]);
  const refs = new Map<string, string>([["main", root.sha]]);
  const pulls: FakePull[] = [];
  let origin = "";
  let token = options.token;

  const filesAt = (sha: string): Record<string, string> => {
    const chain: FakeCommit[] = [];
    for (let c = commits.get(sha); c; c = commits.get(c.parent)) chain.unshift(c);
    return Object.assign({}, ...chain.map((c) => c.changed));
  };

  const fake = (await serve(http.createServer(), "http", (r, res) => {
    const answer = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
      res.end(JSON.stringify(body));
    };
    const auth = String(r.headers.authorization ?? "");
    if (auth !== `token ${token}` && auth !== `Bearer ${token}`)
      return answer(401, { message: "Bad credentials", documentation_url: "https://docs.github.com/rest" });
    const path = decodeURIComponent(r.path.replace(/^\/api\/v3/, "").split("?")[0] ?? "");
    const query = new URLSearchParams(r.path.split("?")[1] ?? "");
    const prefix = `/repos/${owner}/${repo}`;
    if (!path.startsWith(`${prefix}/`)) return answer(404, { message: "Not Found" });
    const rest = path.slice(prefix.length);
    let body: Record<string, unknown> = {};
    try {
      body = r.body ? (JSON.parse(r.body) as Record<string, unknown>) : {};
    } catch {
      return answer(400, { message: "Problems parsing JSON" });
    }
    const refBody = (branch: string, sha: string) => ({
      ref: `refs/heads/${branch}`,
      node_id: sha1(`node${branch}`),
      url: `${origin}${prefix}/git/refs/heads/${branch}`,
      object: { sha, type: "commit", url: `${origin}${prefix}/git/commits/${sha}` },
    });

    const getRef = /^\/git\/ref\/heads\/(.+)$/.exec(rest);
    if (r.method === "GET" && getRef?.[1]) {
      const sha = refs.get(getRef[1]);
      return sha ? answer(200, refBody(getRef[1], sha)) : answer(404, { message: "Not Found" });
    }
    if (r.method === "POST" && rest === "/git/refs") {
      const ref = String(body.ref ?? "");
      const sha = String(body.sha ?? "");
      if (!ref.startsWith("refs/heads/") || !commits.has(sha))
        return answer(422, { message: "Reference update failed" });
      const branch = ref.slice("refs/heads/".length);
      if (refs.has(branch)) return answer(422, { message: "Reference already exists" });
      refs.set(branch, sha);
      return answer(201, refBody(branch, sha));
    }
    const contents = /^\/contents\/(.+)$/.exec(rest);
    if (r.method === "PUT" && contents?.[1]) {
      const file = contents[1];
      const branch = String(body.branch ?? "main");
      const parent = refs.get(branch);
      if (!parent) return answer(404, { message: `Branch ${branch} not found` });
      if (typeof body.message !== "string" || typeof body.content !== "string")
        return answer(422, { message: "Invalid request" });
      if (filesAt(parent)[file] !== undefined && typeof body.sha !== "string")
        return answer(422, { message: '"sha" wasn\'t supplied.' });
      const text = Buffer.from(body.content, "base64").toString("utf8");
      const commit: FakeCommit = {
        sha: sha1(`${parent}${file}${text}${body.message}`),
        parent,
        message: body.message,
        changed: { [file]: text },
      };
      commits.set(commit.sha, commit);
      refs.set(branch, commit.sha);
      return answer(201, {
        content: { name: file.split("/").pop(), path: file, sha: sha1(text), type: "file" },
        commit: { sha: commit.sha, message: commit.message, parents: [{ sha: parent }] },
      });
    }
    if (r.method === "GET" && rest === "/pulls") {
      const head = (query.get("head") ?? "").replace(`${owner}:`, "");
      return answer(
        200,
        pulls
          .filter((p) => p.head === head)
          .map((p) => ({
            number: p.number,
            html_url: `https://git.example/${owner}/${repo}/pull/${p.number}`,
            state: "open",
            draft: p.draft,
            title: p.title,
            head: { ref: p.head },
            base: { ref: p.base },
          })),
      );
    }
    if (r.method === "GET" && contents?.[1]) {
      const text = filesAt(refs.get(query.get("ref") ?? "main") ?? "")[contents[1]];
      if (text === undefined) return answer(404, { message: "Not Found" });
      return answer(200, {
        type: "file",
        path: contents[1],
        sha: sha1(text),
        encoding: "base64",
        content: Buffer.from(text).toString("base64"),
      });
    }
    if (r.method === "POST" && rest === "/pulls") {
      const head = String(body.head ?? "");
      const base = String(body.base ?? "");
      if (!refs.has(head) || !refs.has(base))
        return answer(422, { message: "Validation Failed", errors: [{ resource: "PullRequest", code: "invalid" }] });
      const pull: FakePull = {
        number: pulls.length + 1,
        title: String(body.title ?? ""),
        head,
        base,
        body: String(body.body ?? ""),
        draft: body.draft === true,
      };
      pulls.push(pull);
      return answer(201, {
        number: pull.number,
        html_url: `https://git.example/${owner}/${repo}/pull/${pull.number}`,
        state: "open",
        draft: pull.draft,
        title: pull.title,
        head: { ref: head, sha: refs.get(head) },
        base: { ref: base, sha: refs.get(base) },
      });
    }
    return answer(404, { message: "Not Found" });
  })) as GitHostFake;
  origin = fake.url;
  return Object.assign(fake, {
    owner,
    repo,
    refs,
    commits,
    pulls,
    rotateToken: (next: string) => {
      token = next;
    },
    filesOf: (branch: string) => {
      const sha = refs.get(branch);
      return sha ? filesAt(sha) : {};
    },
  });
}
