import type { AttachmentBlock, FetchedAttachment } from "./attachment-fetcher.js";
import type { AttachmentRef } from "./types.js";

/**
 * The gate between a channel's attachments and the tools (spec operator-console.md §5 item 6′;
 * ledger C-424, C-430–C-435). Each attachment is fetched by the server-owned fetcher (byte count and
 * SHA-256, C-427–C-429), then — only on verified bytes — checked for what it claims to be
 * (malformed, C-434), for protection the service cannot read (unknown protection, C-432) and by the
 * malware scanner (infected, C-431; no verdict yet = held, C-430). Anything blocked never reaches a
 * tool: only {@link AttachmentEvidence} of admitted attachments is handed on, as evidence data with
 * its digest. Nothing here turns bytes into text: an image is evidence by digest and type only, so
 * its pixels (and any words drawn in them) never become instructions (C-435); the turn's text is
 * what the sender typed, never a file's content.
 */

/** Why an attachment was kept from the tools. */
export type AttachmentBlockReason = AttachmentBlock | "held" | "infected" | "unknown_protection";

/** The malware scanner's verdict: `held` while no verdict exists (a pending scan, or no scanner). */
export type ScanVerdict = "clean" | "infected" | "held";

/** A malware scanner (Defender for Storage, a clamd, …). It receives bytes as data, never executes them. */
export interface MalwareScanner {
  scan(input: { bytes: Buffer; media_type: string; sha256: string }): Promise<ScanVerdict>;
}

/** What a tool may receive of an admitted attachment: metadata and digest, never a URL or the sender's text about it. */
export interface AttachmentEvidence {
  vendor_id: string;
  name: string;
  media_type: string;
  size_bytes: number;
  sha256: string;
  kind: "image" | "document" | "text";
  bytes: Buffer;
}

export type GateOutcome =
  | { status: "admitted"; evidence: AttachmentEvidence }
  | {
      status: "blocked";
      vendor_id: string;
      name: string;
      reason: AttachmentBlockReason;
      /** Why, in words, when the reason alone does not say it (e.g. {@link NO_SCANNER_DETAIL}). */
      detail?: string;
    };

/** Why every attachment is held in a deployment without a malware scanner. */
export const NO_SCANNER_DETAIL = "no malware scanner is configured";

/**
 * The gate of a deployment without a malware scanner (none is part of this product yet): every
 * attachment is `held` (C-430) **without being downloaded** — fetching bytes that can never be
 * admitted would only spend the vendor's quota and hold unscanned content in memory.
 */
export async function holdWithoutScanner(refs: readonly AttachmentRef[]): Promise<GateOutcome[]> {
  return refs.map((ref) => ({
    status: "blocked",
    vendor_id: ref.vendor_id,
    name: ref.name,
    reason: "held",
    detail: NO_SCANNER_DETAIL,
  }));
}

/** The media types the service accepts, each with the signature its bytes must start with. */
const SIGNATURES: Record<string, { kind: AttachmentEvidence["kind"]; magic?: number[] }> = {
  "image/png": { kind: "image", magic: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] },
  "image/jpeg": { kind: "image", magic: [0xff, 0xd8, 0xff] },
  "image/gif": { kind: "image", magic: [0x47, 0x49, 0x46, 0x38] },
  "application/pdf": { kind: "document", magic: [0x25, 0x50, 0x44, 0x46, 0x2d] },
  "application/vnd.openxmlformats-officedocument.wordprocessingml.document": {
    kind: "document",
    magic: [0x50, 0x4b, 0x03, 0x04],
  },
  "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": {
    kind: "document",
    magic: [0x50, 0x4b, 0x03, 0x04],
  },
  "text/plain": { kind: "text" },
  "text/csv": { kind: "text" },
  "application/json": { kind: "text" },
};

/** The OLE compound file signature: how an RMS/IRM-encrypted Office document arrives. */
const CFB_MAGIC = [0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1];

const startsWith = (bytes: Buffer, magic: number[]) =>
  bytes.length >= magic.length && magic.every((b, i) => bytes[i] === b);

/** The media type without parameters, lower case. */
const baseType = (mediaType: string) => mediaType.split(";")[0]?.trim().toLowerCase() ?? "";

/**
 * Whether the bytes are what the attachment claims: a known type whose bytes carry its signature,
 * or text that is valid UTF-8 without NUL (and, for JSON, parses). Anything else is malformed.
 */
export function isWellFormed(bytes: Buffer, mediaType: string): boolean {
  const type = SIGNATURES[baseType(mediaType)];
  if (!type || bytes.length === 0) return false;
  if (type.magic) return startsWith(bytes, type.magic);
  if (bytes.includes(0)) return false;
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return false;
  }
  if (baseType(mediaType) === "application/json") {
    try {
      JSON.parse(text);
    } catch {
      return false;
    }
  }
  return true;
}

/**
 * Protection the service cannot read: an encrypted PDF (`/Encrypt` in its trailer dictionary) or
 * an Office document wrapped in an encrypted compound file (RMS/IRM: the `EncryptedPackage`
 * stream). The service holds no key for either, so their content is unknown: blocked.
 */
export function hasUnknownProtection(bytes: Buffer, mediaType: string): boolean {
  if (startsWith(bytes, CFB_MAGIC)) return true;
  if (baseType(mediaType) === "application/pdf") return hasPdfName(bytes, "/Encrypt");
  return false;
}

/**
 * Whether a PDF holds the name exactly (`/Encrypt`, not `/EncryptMetadata`), also when written with
 * `#xx` escapes (`/Encr#79pt`, PDF 1.2+ names): each name token is decoded before it is compared.
 */
function hasPdfName(bytes: Buffer, name: string): boolean {
  const text = bytes.toString("latin1");
  for (const match of text.matchAll(/\/(?:[A-Za-z0-9]|#[0-9A-Fa-f]{2})+/g)) {
    const decoded = match[0].replace(/#([0-9A-Fa-f]{2})/g, (_, hex: string) =>
      String.fromCharCode(Number.parseInt(hex, 16)),
    );
    if (decoded === name) return true;
  }
  return false;
}

/**
 * Gates one turn's attachments, in order: the fetcher's verdict, then the protection check, the
 * media check and the malware scan. Without a scanner every attachment is held (fail closed).
 */
export async function gateAttachments(
  refs: readonly AttachmentRef[],
  deps: { fetch(ref: AttachmentRef): Promise<FetchedAttachment>; scanner?: MalwareScanner },
): Promise<GateOutcome[]> {
  const out: GateOutcome[] = [];
  for (const ref of refs) {
    const blocked = (reason: AttachmentBlockReason): GateOutcome => ({
      status: "blocked",
      vendor_id: ref.vendor_id,
      name: ref.name,
      reason,
    });
    const fetched = await deps.fetch(ref);
    if (fetched.status === "blocked") {
      out.push(blocked(fetched.reason));
      continue;
    }
    // Protection first: an IRM-protected docx/xlsx is a compound file, not the zip its type names,
    // and must be reported as protection, not as malformed.
    if (hasUnknownProtection(fetched.bytes, ref.media_type)) {
      out.push(blocked("unknown_protection"));
      continue;
    }
    if (!isWellFormed(fetched.bytes, ref.media_type)) {
      out.push(blocked("malformed"));
      continue;
    }
    const verdict: ScanVerdict = deps.scanner
      ? await deps.scanner
          .scan({ bytes: fetched.bytes, media_type: baseType(ref.media_type), sha256: fetched.sha256 })
          .catch(() => "held" as const)
      : "held";
    if (verdict !== "clean") {
      out.push(blocked(verdict === "infected" ? "infected" : "held"));
      continue;
    }
    out.push({
      status: "admitted",
      evidence: {
        vendor_id: ref.vendor_id,
        name: ref.name,
        media_type: baseType(ref.media_type),
        size_bytes: fetched.size_bytes,
        sha256: fetched.sha256,
        kind: SIGNATURES[baseType(ref.media_type)]?.kind ?? "document",
        bytes: fetched.bytes,
      },
    });
  }
  return out;
}
