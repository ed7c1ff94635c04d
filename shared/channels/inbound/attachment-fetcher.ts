import { createHash } from "node:crypto";
import type { AttachmentRef } from "./types.js";
import { isLoopbackUrl } from "../../http/loopback-host.js";

/**
 * The server-owned attachment fetcher (spec operator-console.md §5 item 6′; ledger C-427–C-429,
 * C-433). Adapters keep only an attachment's bounded metadata and the vendor's opaque id (their
 * download URLs are dropped, C-425/C-426); this fetcher resolves the id with the app's own
 * credentials (a bot token, never a user's), downloads at most `maxBytes`, and checks the byte
 * count and the SHA-256 before anything downstream may use the bytes. Any mismatch blocks the
 * attachment: nothing is handed on. The bytes are returned as data; nothing here reads them as
 * text or instructions.
 *
 * The attachment gate (`attachment-gate.ts`) runs it first; what it blocks never reaches a tool.
 */

/** Where the app's credential resolves a vendor file id to a download (Slack `files.info`, …). */
export interface AttachmentSource {
  /** The download for `vendorId`, resolved with the app's credential; undefined when the vendor has no such file. */
  open(vendorId: string): Promise<{ url: string; headers: Record<string, string> } | undefined>;
}

export type AttachmentBlock = "oversized" | "size_mismatch" | "digest_mismatch" | "unavailable" | "malformed";

export type FetchedAttachment =
  | { status: "verified"; vendor_id: string; size_bytes: number; sha256: string; bytes: Buffer }
  | { status: "blocked"; vendor_id: string; reason: AttachmentBlock };

const SHA256_HEX = /^[0-9a-f]{64}$/;

export async function fetchAttachment(
  ref: AttachmentRef,
  deps: { source: AttachmentSource; maxBytes: number; timeoutMs?: number; allowLoopbackHttp?: boolean },
): Promise<FetchedAttachment> {
  const blocked = (reason: AttachmentBlock): FetchedAttachment => ({
    status: "blocked",
    vendor_id: ref.vendor_id,
    reason,
  });
  if (ref.size_bytes > deps.maxBytes) return blocked("oversized");
  if (ref.sha256 !== undefined && !SHA256_HEX.test(ref.sha256)) return blocked("malformed");
  let target: Awaited<ReturnType<AttachmentSource["open"]>>;
  try {
    target = await deps.source.open(ref.vendor_id);
  } catch {
    return blocked("unavailable");
  }
  if (!target || !URL.canParse(target.url)) return blocked("unavailable");
  const url = new URL(target.url);
  if (url.protocol !== "https:" && !(deps.allowLoopbackHttp && url.protocol === "http:" && isLoopbackUrl(url)))
    return blocked("unavailable");
  let response: Response;
  try {
    response = await fetch(url, {
      headers: target.headers,
      // A redirect could leave the vendor's host with the app's credential: refused.
      redirect: "error",
      signal: AbortSignal.timeout(deps.timeoutMs ?? 30_000),
    });
  } catch {
    return blocked("unavailable");
  }
  if (!response.ok || !response.body) {
    await response.body?.cancel().catch(() => undefined);
    return blocked("unavailable");
  }
  const declared = Number(response.headers.get("content-length") ?? "NaN");
  if (Number.isFinite(declared) && declared > deps.maxBytes) {
    await response.body.cancel().catch(() => undefined);
    return blocked("oversized");
  }
  const hash = createHash("sha256");
  const chunks: Buffer[] = [];
  let size = 0;
  const reader = response.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > deps.maxBytes) {
        await reader.cancel().catch(() => undefined);
        return blocked("oversized");
      }
      hash.update(value);
      chunks.push(Buffer.from(value));
    }
  } catch {
    return blocked("unavailable");
  }
  // The vendor's stated size, when it stated one, must be what arrived (C-428).
  if (ref.size_bytes > 0 && size !== ref.size_bytes) return blocked("size_mismatch");
  const sha256 = hash.digest("hex");
  // The stated digest, when there is one, must match (C-429).
  if (ref.sha256 !== undefined && ref.sha256 !== sha256) return blocked("digest_mismatch");
  return { status: "verified", vendor_id: ref.vendor_id, size_bytes: size, sha256, bytes: Buffer.concat(chunks) };
}

/**
 * Chat platform B's source: `files.info` with the bot token (the app's credential, C-427), then its
 * `url_private_download` with the same token. The URL comes from Slack's answer to the server's own
 * call, never from the inbound event (whose URLs the adapter dropped).
 */
export function slackAttachmentSource(options: { apiUrl: string; token: string }): AttachmentSource {
  const base = options.apiUrl.endsWith("/") ? options.apiUrl : `${options.apiUrl}/`;
  return {
    async open(vendorId) {
      if (!/^F[A-Z0-9]{1,40}$/.test(vendorId)) return undefined;
      const response = await fetch(new URL("files.info", base), {
        method: "POST",
        headers: {
          authorization: `Bearer ${options.token}`,
          "content-type": "application/x-www-form-urlencoded",
        },
        body: new URLSearchParams({ file: vendorId }).toString(),
        redirect: "error",
        signal: AbortSignal.timeout(10_000),
      });
      const body = (await response.json().catch(() => undefined)) as
        | { ok?: boolean; file?: { url_private_download?: unknown } }
        | undefined;
      const url = body?.ok === true ? body.file?.url_private_download : undefined;
      if (typeof url !== "string") return undefined;
      return { url, headers: { authorization: `Bearer ${options.token}` } };
    },
  };
}
