import { execFile } from "node:child_process";
import { statSync } from "node:fs";
import path from "node:path";
import { ToolError } from "../tools/tool.js";
import type { DeploymentHistoryProvider, DeploymentRecord } from "./providers.js";

/**
 * What in this repository is "the deployment": the infrastructure and manifests (`infra/`), the
 * server-owned catalogs (`config/`) and the Functions host settings. A commit touching any of them
 * in the window is a deployment change; every tag is a release.
 */
export const GIT_DEPLOYMENT_PATHS = ["infra", "config", "host.json"] as const;

const FIELD = "\x1f";
const RECORD = "\x1e";
const GIT_TIMEOUT_MS = 10_000;

/**
 * `query_deployments`' Git history over one server-configured repository, read with `git` through
 * `execFile` (no shell) and fixed argument lists: the only inputs are the configured directory
 * (checked to be an absolute path to a directory) and times the tool computed. Git runs with no
 * system or global configuration, no pager, no prompt and no optional locks.
 */
export function createGitDeploymentsProvider(options: { repositoryDir: string }): DeploymentHistoryProvider {
  const dir = options.repositoryDir;
  if (!path.isAbsolute(dir)) throw new Error("the deployment repository must be an absolute path");
  const git = (args: readonly string[]) =>
    new Promise<string>((resolve, reject) => {
      // A directory configured by the operator is trusted as such, whoever owns it.
      const argv = ["--no-pager", "-c", `safe.directory=${dir}`, "-c", "core.fsmonitor=false", "-C", dir, ...args];
      execFile(
        "git",
        argv,
        {
          timeout: GIT_TIMEOUT_MS,
          maxBuffer: 16 * 1024 * 1024,
          encoding: "utf8",
          env: {
            PATH: process.env.PATH ?? "/usr/bin:/bin",
            GIT_CONFIG_NOSYSTEM: "1",
            GIT_CONFIG_GLOBAL: "/dev/null",
            GIT_TERMINAL_PROMPT: "0",
            GIT_OPTIONAL_LOCKS: "0",
            LC_ALL: "C",
          },
        },
        (error, stdout) => (error ? reject(error) : resolve(stdout)),
      );
    });
  const rows = (text: string) =>
    text
      .split(RECORD)
      .map((r) => r.replace(/^\n/, ""))
      .filter(Boolean)
      .map((r) => r.split(FIELD));
  return {
    async list(window, limit) {
      try {
        if (!statSync(dir).isDirectory()) throw new Error("not a directory");
      } catch {
        throw new ToolError("unavailable", "the deployment repository is not readable", { source: "git" });
      }
      try {
        const [log, tags] = await Promise.all([
          git([
            "log",
            `--since=${window.start.toISOString()}`,
            `--until=${window.end.toISOString()}`,
            `--max-count=${limit + 1}`,
            "--no-color",
            `--format=%H${FIELD}%cI${FIELD}%an${FIELD}%s${RECORD}`,
            "--",
            ...GIT_DEPLOYMENT_PATHS,
          ]),
          git([
            "for-each-ref",
            "--sort=-creatordate",
            "--format=%(refname:short)%1f%(creatordate:iso-strict)%1f%(objectname:short)%1f%(subject)%1e",
            "refs/tags",
          ]),
        ]);
        const records: DeploymentRecord[] = [];
        for (const [hash = "", at = "", author = "", subject = ""] of rows(log)) {
          records.push({
            at: new Date(at).toISOString(),
            source: "git",
            kind: "git.commit",
            name: hash.slice(0, 12),
            detail: { commit: hash, author, subject: subject.slice(0, 200) },
          });
        }
        for (const [tag = "", at = "", object = "", subject = ""] of rows(tags)) {
          const time = Date.parse(at);
          if (Number.isNaN(time) || time < window.start.getTime() || time > window.end.getTime()) continue;
          records.push({
            at: new Date(time).toISOString(),
            source: "git",
            kind: "git.tag",
            name: tag,
            detail: { object, subject: subject.slice(0, 200) },
          });
        }
        records.sort((a, b) => b.at.localeCompare(a.at));
        return { records: records.slice(0, limit), truncated: records.length > limit };
      } catch (error) {
        if (error instanceof ToolError) throw error;
        throw new ToolError("unavailable", "the deployment repository could not be read", { source: "git" });
      }
    },
  };
}
