import https from "node:https";
import type { Browser, BrowserContext, Route } from "playwright-core";
import type { EvidenceReference, EvidenceStore } from "../../ops/evidence-store.js";
import { ToolError } from "../tools/tool.js";
import type { BrowserEvidencePolicy, BrowserEvidencePolicyCatalog } from "./browser-evidence-policies.js";
import type { BrowserEvidenceArtifact, BrowserEvidenceProvider } from "./providers.js";

/**
 * Keeps Chromium from reaching Google's services and from using a GPU (each launch gets a fresh,
 * empty profile from Playwright). The resolver rule makes every host, IP literals included,
 * unresolvable to Chromium itself: a request that slipped past the route (Chromium follows a
 * redirect it was handed without asking the route again) fails instead of reaching the network.
 */
export const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--dns-prefetch-disable",
  "--host-resolver-rules=MAP * ~NOTFOUND",
  "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
] as const;

/** Redirects the fetcher follows for one request, each hop checked against the policy's origins. */
const MAX_REDIRECTS = 5;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

/** Response headers passed on to the page; `Set-Cookie` and every other header are dropped. */
const PASSED_RESPONSE_HEADERS = new Set(["content-type", "location", "content-language", "last-modified"]);
/** Per element: the text kept in the artifact. */
const MAX_ELEMENT_TEXT = 8000;
/** After the navigation's share of the time bound, what is left goes to capturing the elements. */
const NAVIGATION_SHARE = 0.7;
/** How long past its time bound a capture may take before the browser is closed under it. */
const HARD_STOP_GRACE_MS = 5000;
/** Chromium's start, which the page's time bound does not include. */
const LAUNCH_TIMEOUT_MS = 30_000;
/** Browsers one provider runs at once. */
export const MAX_CONCURRENT_CAPTURES = 2;

interface ElementRecord {
  selector: string;
  found: boolean;
  text: string;
  text_truncated: boolean;
  screenshot: EvidenceReference | null;
}

/** The stored artifact: what was captured, under which policy, and whether a bound cut it short. */
export interface BrowserEvidenceManifest {
  format: "blastplane.browser-evidence/1";
  policy_id: string;
  policy_version: number;
  source_url: string;
  captured_at: string;
  truncated: boolean;
  truncation: { bytes: boolean; time: boolean };
  bytes_received: number;
  requests: { allowed: number; refused: number };
  elements: ElementRecord[];
}

function refused(message: string, details: Record<string, unknown>): never {
  throw new ToolError("invalid_arguments", `refused: ${message}; nothing was launched`, details);
}

/** The exact policy for these arguments, or a refusal before anything runs (C-101). */
export function policyFor(
  catalog: BrowserEvidencePolicyCatalog,
  request: { policy_id: string; policy_version: number; source_url: string; stable_selectors: string[] },
): BrowserEvidencePolicy {
  const policy = catalog.policies.find((p) => p.id === request.policy_id);
  if (!policy) refused(`no server-owned policy ${request.policy_id}`, { policy_id: request.policy_id });
  if (policy.version !== request.policy_version)
    refused(`policy ${policy.id} is at version ${policy.version}, not ${request.policy_version}`, {
      policy_id: policy.id,
      policy_version: policy.version,
    });
  let url: URL;
  try {
    url = new URL(request.source_url);
  } catch {
    refused("the source URL is not a URL", { policy_id: policy.id });
  }
  if (url.protocol !== "https:" || !policy.allowed_origins.includes(url.origin) || url.username || url.password)
    refused(`policy ${policy.id} does not allow ${url.origin}`, {
      policy_id: policy.id,
      allowed_origins: policy.allowed_origins,
    });
  const unknown = request.stable_selectors.filter((s) => !policy.selectors.includes(s));
  if (unknown.length > 0)
    refused(`policy ${policy.id} does not allow the selectors ${unknown.join(", ")}`, {
      policy_id: policy.id,
      allowed_selectors: policy.selectors,
    });
  return policy;
}

/**
 * Fetches one response for the page from Node, not from Chromium: a GET with a fixed header set
 * (no cookie, no authorization, no client certificate, whatever the page asked for), the body
 * read up to `maxBytes` and until `deadline`. Redirects are followed by the caller, hop by hop.
 */
function fetchBounded(
  url: URL,
  options: { maxBytes: number; deadline: number; accept: string; ca?: string },
): Promise<{ status: number; headers: Record<string, string>; body: Buffer; cut: "bytes" | "time" | undefined }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    let status = 0;
    let headers: Record<string, string> = {};
    const finish = (cut: "bytes" | "time" | undefined) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      request.destroy();
      resolve({ status, headers, body: Buffer.concat(chunks, size), cut });
    };
    const request = https.request(url, {
      method: "GET",
      headers: { accept: options.accept, "accept-encoding": "identity", "user-agent": "blastplane-evidence/1" },
      agent: false,
      ...(options.ca ? { ca: options.ca } : {}),
    });
    const timer = setTimeout(
      () => (status ? finish("time") : fail(new Error("the time bound passed before the server answered"))),
      Math.max(0, options.deadline - Date.now()),
    );
    const fail = (error: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      request.destroy();
      reject(error);
    };
    request.on("response", (response) => {
      status = response.statusCode ?? 502;
      headers = {};
      for (const [name, value] of Object.entries(response.headers))
        if (PASSED_RESPONSE_HEADERS.has(name) && typeof value === "string") headers[name] = value;
      if (headers.location) {
        try {
          headers.location = new URL(headers.location, url).href;
        } catch {
          delete headers.location;
        }
      }
      response.on("data", (chunk: Buffer) => {
        const room = options.maxBytes - size;
        if (chunk.length >= room) {
          if (room > 0) chunks.push(chunk.subarray(0, room));
          size += Math.max(0, room);
          finish(chunk.length > room ? "bytes" : undefined);
          return;
        }
        chunks.push(chunk);
        size += chunk.length;
      });
      response.on("end", () => finish(undefined));
      response.on("error", (error) => (size > 0 ? finish("time") : fail(error)));
    });
    request.on("error", fail);
    request.end();
  });
}

/**
 * `capture_browser_evidence`'s provider: headless Chromium (playwright-core, loaded on first use)
 * under an exact server-owned policy. Every request the page makes is answered by
 * {@link fetchBounded} or aborted: only GETs to the policy's exact https origins, with no
 * credentials, within one byte budget and one deadline. The artifact — the selected elements'
 * screenshots and text — is stored content-addressed and write-once; the caller gets its id and
 * digest, never a page or anything to navigate or click. The browser is closed before the call
 * returns, whatever happened.
 */
export function createBrowserEvidenceProvider(options: {
  policies: BrowserEvidencePolicyCatalog;
  store: EvidenceStore;
  executablePath: string;
  /** Trusted CA for the fetcher (tests trust their loopback server; production keeps the system's). */
  ca?: string;
  now?: () => Date;
}): BrowserEvidenceProvider {
  const now = options.now ?? (() => new Date());
  let running = 0;
  return {
    async capture(request): Promise<BrowserEvidenceArtifact> {
      const policy = policyFor(options.policies, request);
      // Each capture is a browser: a few at a time, and the rest told so rather than queued unbounded.
      if (running >= MAX_CONCURRENT_CAPTURES)
        throw new ToolError(
          "unavailable",
          `${MAX_CONCURRENT_CAPTURES} captures are already running; try again when one has finished`,
          { policy_id: policy.id },
        );
      running++;
      try {
        return await captureUnder(policy, request);
      } finally {
        running--;
      }
    },
  };

  async function captureUnder(
    policy: BrowserEvidencePolicy,
    request: { source_url: string; stable_selectors: string[] },
  ): Promise<BrowserEvidenceArtifact> {
    const { chromium } = await import("playwright-core");
    // The bound is the page's: it starts once the browser is up, so a slow launch costs no page time.
    let deadline = Number.POSITIVE_INFINITY;
    let navigationDeadline = Number.POSITIVE_INFINITY;
    const captured_at = now().toISOString();
    const cut = { bytes: false, time: false };
    const requests = { allowed: 0, refused: 0 };
    let bytesLeft = policy.max_bytes;
    let browser: Browser | undefined;
    let hardStop: NodeJS.Timeout | undefined;
    const elements: ElementRecord[] = [];
    try {
      browser = await chromium.launch({
        executablePath: options.executablePath,
        headless: true,
        args: [...CHROMIUM_FLAGS],
        timeout: LAUNCH_TIMEOUT_MS,
      });
      const context: BrowserContext = await browser.newContext({
        viewport: policy.viewport,
        acceptDownloads: false,
        serviceWorkers: "block",
        javaScriptEnabled: true,
        bypassCSP: false,
      });
      await context.routeWebSocket(/.*/, (ws) => ws.close());
      await context.route("**/*", async (route: Route) => {
        const req = route.request();
        let url: URL;
        try {
          url = new URL(req.url());
        } catch {
          requests.refused++;
          return route.abort("blockedbyclient");
        }
        if (
          req.method() !== "GET" ||
          url.protocol !== "https:" ||
          !policy.allowed_origins.includes(url.origin) ||
          bytesLeft <= 0 ||
          Date.now() >= navigationDeadline
        ) {
          requests.refused++;
          if (bytesLeft <= 0) cut.bytes = true;
          else if (Date.now() >= navigationDeadline) cut.time = true;
          return route.abort("blockedbyclient");
        }
        requests.allowed++;
        try {
          // Redirects are followed here, never by Chromium (which would not ask the route again).
          for (let hop = 0; ; hop++) {
            const response = await fetchBounded(url, {
              maxBytes: bytesLeft,
              deadline: navigationDeadline,
              accept: req.headers().accept ?? "*/*",
              ...(options.ca ? { ca: options.ca } : {}),
            });
            bytesLeft -= response.body.length;
            if (response.cut) cut[response.cut] = true;
            const location = REDIRECT_STATUSES.has(response.status) ? response.headers.location : undefined;
            if (location === undefined)
              return await route.fulfill({ status: response.status, headers: response.headers, body: response.body });
            const next = new URL(location);
            if (
              hop >= MAX_REDIRECTS ||
              next.protocol !== "https:" ||
              !policy.allowed_origins.includes(next.origin) ||
              bytesLeft <= 0
            ) {
              requests.refused++;
              return await route.abort("blockedbyclient");
            }
            url = next;
          }
        } catch {
          if (Date.now() >= navigationDeadline) cut.time = true;
          await route.abort("failed").catch(() => undefined);
        }
      });
      const page = await context.newPage();
      const started = Date.now();
      deadline = started + policy.max_time_ms;
      navigationDeadline = started + Math.floor(policy.max_time_ms * NAVIGATION_SHARE);
      // The bound holds even if Chromium stops answering: the browser is closed under the call.
      const launched = browser;
      hardStop = setTimeout(
        () => void launched.close().catch(() => undefined),
        policy.max_time_ms + HARD_STOP_GRACE_MS,
      );
      await page
        .goto(request.source_url, { waitUntil: "load", timeout: Math.max(1, deadline - Date.now()) })
        .catch(() => {
          // Cut by a bound (or refused): what arrived is still captured, and the artifact says so.
          cut.time ||= Date.now() >= navigationDeadline;
        });
      for (const selector of request.stable_selectors) {
        const left = deadline - Date.now();
        const locator = page.locator(selector).first();
        // Status pages often render their elements from script: wait for each, within the bound.
        const found =
          left > 0 &&
          (await locator.waitFor({ state: "visible", timeout: left }).then(
            () => true,
            () => false,
          ));
        if (!found) {
          if (left <= 0) cut.time = true;
          elements.push({ selector, found: false, text: "", text_truncated: false, screenshot: null });
          continue;
        }
        // biome-ignore lint/performance/useDomNodeTextContent: the rendered text is what an operator sees, not script or hidden nodes
        const text = ((await locator.innerText({ timeout: Math.max(1, left) }).catch(() => "")) ?? "").slice(
          0,
          MAX_ELEMENT_TEXT + 1,
        );
        const png = await locator
          .screenshot({ timeout: Math.max(1, deadline - Date.now()), animations: "disabled", type: "png" })
          .catch(() => undefined);
        if (!png && Date.now() >= deadline) cut.time = true;
        elements.push({
          selector,
          found: true,
          text: text.slice(0, MAX_ELEMENT_TEXT),
          text_truncated: text.length > MAX_ELEMENT_TEXT,
          screenshot: png ? await options.store.put(png, "image/png", "Reader") : null,
        });
      }
    } catch (error) {
      if (error instanceof ToolError) throw error;
      throw new ToolError("unavailable", "the browser could not capture the page", { policy_id: policy.id });
    } finally {
      clearTimeout(hardStop);
      await browser?.close().catch(() => undefined);
    }
    const manifest: BrowserEvidenceManifest = {
      format: "blastplane.browser-evidence/1",
      policy_id: policy.id,
      policy_version: policy.version,
      source_url: request.source_url,
      captured_at,
      truncated: cut.bytes || cut.time,
      truncation: cut,
      bytes_received: policy.max_bytes - bytesLeft,
      requests,
      elements,
    };
    const stored = await options.store.put(Buffer.from(JSON.stringify(manifest)), "application/json", "Reader");
    return {
      artifact_id: stored.evidence_id,
      sha256: stored.sha256,
      size: stored.size,
      captured_at,
      policy_id: policy.id,
      policy_version: policy.version,
      truncated: manifest.truncated,
    };
  }
}
