import { createHash } from "node:crypto";
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAzurite } from "../../local/azurite.js";
import { loadBrowserEvidencePolicies } from "../../shared/console/providers/browser-evidence-policies.js";
import {
  type BrowserEvidenceManifest,
  createBrowserEvidenceProvider,
  MAX_CONCURRENT_CAPTURES,
} from "../../shared/console/providers/browser-evidence.js";
import type { ToolResult } from "../../shared/console/tools/tool.js";
import { CatalogLoadError } from "../../shared/ops/catalog/json-catalog.js";
import { createEvidenceStore, type EvidenceStore } from "../../shared/ops/evidence-store.js";
import { openBlobContainer } from "../../shared/storage/blob-container.js";
import { CHROMIUM } from "../e2e/browser.js";
import { type EvidenceTarget, startEvidenceTarget } from "../fakes/evidence-target.js";
import { callerWith, consoleHarness } from "../support/console-harness.js";
import { prefixedTables, testAzurite } from "../support/service-fakes.js";

let azurite: RunningAzurite;
let target: EvidenceTarget;
let foreign: EvidenceTarget;
let dir: string;
let store: EvidenceStore;
let counter = 0;
let containerName: string;
/** A Chromium that notes each launch before it starts, so a test can see that nothing was launched. */
let chromiumWrapper: string;
let launchMarker: string;

beforeAll(async () => {
  [azurite, foreign] = await Promise.all([testAzurite(), startEvidenceTarget()]);
  target = await startEvidenceTarget({ foreignOrigin: foreign.origin });
  dir = mkdtempSync(path.join(tmpdir(), "bp-evidence-"));
  launchMarker = path.join(dir, "launches");
  chromiumWrapper = path.join(dir, "chromium");
  writeFileSync(
    chromiumWrapper,
    `#!/bin/sh\necho launched >> '${launchMarker}'\n${BROWSER_MARK}=1 exec '${CHROMIUM}' "$@"\n`,
  );
  chmodSync(chromiumWrapper, 0o755);
  containerName = `evidence${Date.now().toString(36)}`;
  store = createEvidenceStore(() => openBlobContainer(azurite.connectionString, containerName));
});
afterAll(async () => {
  await Promise.all([azurite?.stop(), target?.close(), foreign?.close()]);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const launches = () =>
  existsSync(launchMarker) ? readFileSync(launchMarker, "utf8").split("\n").filter(Boolean).length : 0;

/** Marks every process the wrapper's Chromium starts (the environment is inherited, even by helpers that leave its session). */
const BROWSER_MARK = `BP_EVIDENCE_BROWSER_${process.pid}_${Date.now().toString(36)}`;

/** Processes that Chromium of this file started and that are still running, whoever their parent is now. */
function chromiumDescendants(): number[] {
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").includes(`${BROWSER_MARK}=1`);
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** The policy catalog as an operator would write it, with the target's origin. */
function policies(overrides: Record<string, unknown> = {}) {
  const file = path.join(dir, `policies-${++counter}.json`);
  const policy = {
    id: "status_page",
    version: 2,
    description: "The status element of the test status page.",
    allowed_origins: [target.origin],
    max_bytes: 2_000_000,
    max_time_ms: 60_000,
    viewport: { width: 800, height: 600 },
    selectors: ["#status", ".note"],
    ...overrides,
  };
  writeFileSync(file, JSON.stringify({ version: 1, policies: [policy] }, null, 2));
  return loadBrowserEvidencePolicies(file);
}

function harness(catalog = policies()) {
  const provider = createBrowserEvidenceProvider({
    policies: catalog,
    store,
    executablePath: chromiumWrapper,
    ca: target.ca,
  });
  return consoleHarness(prefixedTables(azurite.connectionString, `bev${++counter}x${Date.now().toString(36)}`), {
    providers: { browserEvidence: provider },
    evidence: store,
  });
}

async function capture(h: ReturnType<typeof harness>, args: string): Promise<ToolResult> {
  const reply = await h.coordinator.handleTurn(callerWith("Reader"), { text: `capture_browser_evidence ${args}` });
  const result = reply.tool_results[0];
  if (!result) throw new Error(reply.text);
  return result;
}

async function manifestOf(result: ToolResult): Promise<BrowserEvidenceManifest> {
  if (result.status !== "ok") throw new Error(JSON.stringify(result));
  const stored = await store.get((result.data as { artifact_id: string }).artifact_id);
  if (!stored) throw new Error("the artifact is not in the store");
  return JSON.parse(stored.bytes.toString("utf8")) as BrowserEvidenceManifest;
}

describe("capture_browser_evidence (headless Chromium under a server-owned policy)", () => {
  it("C-101: an unknown policy id, a wrong version, an origin or selector the policy does not allow are refused before anything is launched", async () => {
    const h = harness();
    const before = { launches: launches(), requests: target.log.length };
    for (const args of [
      `policy_id=other_page policy_version=2 source_url=${target.origin}/status stable_selectors=#status`,
      `policy_id=status_page policy_version=1 source_url=${target.origin}/status stable_selectors=#status`,
      `policy_id=status_page policy_version=3 source_url=${target.origin}/status stable_selectors=#status`,
      `policy_id=status_page policy_version=2 source_url=${foreign.origin}/status stable_selectors=#status`,
      `policy_id=status_page policy_version=2 source_url=${target.origin}/status stable_selectors=body`,
    ]) {
      const result = await capture(h, args);
      expect(result).toMatchObject({ status: "error", error: { type: "invalid_arguments" } });
      expect(result.status === "error" && result.error.message).toMatch(/^refused: .*nothing was launched$/);
    }
    expect({ launches: launches(), requests: target.log.length }).toEqual(before);
    expect(foreign.log).toEqual([]);
  });

  it("C-102 C-104: sends no cookie, authorization header or client certificate even when the page sets cookies, redirects and asks for one; returns an immutable stored artifact and leaves no browser behind", async () => {
    const h = harness();
    const first = target.log.length;
    const result = await capture(
      h,
      `policy_id=status_page policy_version=2 source_url=${target.origin}/start stable_selectors=#status,.note`,
    );
    expect(result.status).toBe("ok");
    const artifact = (result as { data: Record<string, unknown> }).data;
    // Only the artifact's identity: nothing to navigate, click or evaluate.
    expect(Object.keys(artifact).sort()).toEqual([
      "artifact_id",
      "captured_at",
      "policy_id",
      "policy_version",
      "sha256",
      "size",
      "truncated",
    ]);
    expect(Object.values(artifact).every((v) => typeof v !== "function" && (typeof v !== "object" || v === null))).toBe(
      true,
    );
    expect(artifact).toMatchObject({
      policy_id: "status_page",
      policy_version: 2,
      truncated: false,
      artifact_id: `sha256-${artifact.sha256}`,
    });
    expect((result as { evidence_ref: string }).evidence_ref).toBe(`artifact:${artifact.artifact_id}`);

    // The target saw the redirect followed, the page's own requests made, and never a credential.
    const seen = target.log.slice(first);
    expect(seen.map((r) => r.path)).toEqual(expect.arrayContaining(["/start", "/status", "/api", "/pixel.svg"]));
    for (const request of seen) {
      expect(request.headers.cookie).toBeUndefined();
      expect(request.headers.authorization).toBeUndefined();
      expect(request.headers["proxy-authorization"]).toBeUndefined();
      expect(request.clientCertificate).toBe(false);
    }
    // A request to an origin outside the policy never left the browser, not even through a redirect.
    const away = await manifestOf(
      await capture(
        harness(policies({ max_time_ms: 3000 })),
        `policy_id=status_page policy_version=2 source_url=${target.origin}/away stable_selectors=#status`,
      ),
    );
    expect(away.elements[0]).toMatchObject({ selector: "#status", found: false, screenshot: null });
    expect(away.requests.refused).toBeGreaterThanOrEqual(1);
    expect(foreign.log).toEqual([]);

    // The stored artifact: the elements' text and PNG screenshots, each content-addressed.
    const stored = await store.get(String(artifact.artifact_id));
    expect(stored?.reference).toMatchObject({
      sha256: artifact.sha256,
      size: artifact.size,
      content_type: "application/json",
      rbac_floor: "Reader",
    });
    expect(
      createHash("sha256")
        .update(stored?.bytes ?? "")
        .digest("hex"),
    ).toBe(artifact.sha256);
    const manifest = await manifestOf(result);
    // A Reader reads the artifact back by its id through the audit reader.
    const readBack = (
      await h.coordinator.handleTurn(callerWith("Reader"), { text: `query_audit evidence_id=${artifact.artifact_id}` })
    ).tool_results[0];
    expect(readBack).toMatchObject({ status: "ok", data: { content: manifest } });
    expect(manifest).toMatchObject({
      policy_id: "status_page",
      policy_version: 2,
      source_url: `${target.origin}/start`,
      truncated: false,
    });
    expect(manifest.requests.refused).toBeGreaterThanOrEqual(1);
    expect(manifest.elements.map((e) => [e.selector, e.found, e.text])).toEqual([
      ["#status", true, "All regions operational"],
      [".note", true, "Last updated a minute ago"],
    ]);
    for (const element of manifest.elements) {
      const png = await store.get(element.screenshot?.evidence_id ?? "");
      expect(png?.reference.content_type).toBe("image/png");
      expect(png?.bytes.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    }

    // Written once: storing the same bytes again leaves the blob as it was.
    const container = await openBlobContainer(azurite.connectionString, containerName);
    const blob = container.getBlockBlobClient(`sha256/${artifact.sha256}`);
    const etag = (await blob.getProperties()).etag;
    expect(await store.put(stored?.bytes ?? Buffer.alloc(0), "application/json", "Owner")).toMatchObject({
      evidence_id: artifact.artifact_id,
      rbac_floor: "Reader",
    });
    expect((await blob.getProperties()).etag).toBe(etag);

    expect(chromiumDescendants()).toEqual([]);
  });

  it("C-103: a page without end stops at the byte bound, and a page that trickles stops at the time bound; each artifact says it was truncated", async () => {
    const bytes = await capture(
      harness(policies({ max_bytes: 200_000 })),
      `policy_id=status_page policy_version=2 source_url=${target.origin}/huge stable_selectors=#status`,
    );
    const bytesManifest = await manifestOf(bytes);
    expect((bytes as { data: { truncated: boolean } }).data.truncated).toBe(true);
    expect(bytesManifest.truncation.bytes).toBe(true);
    expect(bytesManifest.bytes_received).toBeLessThanOrEqual(200_000);
    expect(bytesManifest.elements[0]).toMatchObject({
      selector: "#status",
      found: true,
      text: "All regions operational",
    });

    const time = await capture(
      harness(policies({ max_time_ms: 3000 })),
      `policy_id=status_page policy_version=2 source_url=${target.origin}/slow stable_selectors=#status`,
    );
    const timeManifest = await manifestOf(time);
    expect((time as { data: { truncated: boolean } }).data.truncated).toBe(true);
    expect(timeManifest.truncation.time).toBe(true);
    expect(chromiumDescendants()).toEqual([]);
  });

  it("runs at most two browsers at once; a third capture is told so and launches nothing", async () => {
    const provider = createBrowserEvidenceProvider({
      policies: policies({ max_time_ms: 2000 }),
      store,
      executablePath: chromiumWrapper,
      ca: target.ca,
    });
    const request = {
      policy_id: "status_page",
      policy_version: 2,
      source_url: `${target.origin}/slow`,
      stable_selectors: ["#status"],
    };
    const before = launches();
    const outcomes = await Promise.allSettled([
      provider.capture(request),
      provider.capture(request),
      provider.capture(request),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "fulfilled", "rejected"]);
    expect((outcomes[2] as PromiseRejectedResult).reason).toMatchObject({
      type: "unavailable",
      message: `${MAX_CONCURRENT_CAPTURES} captures are already running; try again when one has finished`,
    });
    expect(launches() - before).toBe(2);
    expect(chromiumDescendants()).toEqual([]);
  });

  it("without a configured provider the tool answers unavailable and launches nothing", async () => {
    const before = launches();
    const h = consoleHarness(prefixedTables(azurite.connectionString, `bevnone${Date.now().toString(36)}`));
    const reply = await h.coordinator.handleTurn(callerWith("Reader"), {
      text: `capture_browser_evidence policy_id=status_page policy_version=2 source_url=${target.origin}/status stable_selectors=#status`,
    });
    expect(reply.tool_results[0]).toMatchObject({ status: "unavailable", error: { type: "unavailable" } });
    expect(launches()).toBe(before);
  });

  it("a policy catalog with a wildcard or a path in an origin refuses to load, naming the file and line", () => {
    expect(() => policies({ allowed_origins: ["https://*.example.org"] })).toThrow(CatalogLoadError);
    expect(() => policies({ allowed_origins: ["https://status.example.org/path"] })).toThrow(
      /policies-\d+\.json:\d+: policies\.0\.allowed_origins\.0: must be an exact https origin/,
    );
    expect(() => policies({ allowed_origins: ["http://status.example.org"] })).toThrow(CatalogLoadError);
  });
});
