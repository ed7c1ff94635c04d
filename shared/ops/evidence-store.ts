import { createHash } from "node:crypto";
import type { ContainerClient } from "@azure/storage-blob";
import { ROLES, type Role } from "../auth/roles.js";

/** The Blob container of evidence too large for an audit entry and of browser artifacts. */
export const EVIDENCE_CONTAINER = "evidence";

/** An evidence id: `sha256-` and the SHA-256 of the stored bytes in lowercase hex. */
export const EVIDENCE_ID_PATTERN = /^sha256-[0-9a-f]{64}$/;

/** What a stored piece of evidence is known by: its content address, digest and size. */
export interface EvidenceReference {
  evidence_id: string;
  sha256: string;
  size: number;
  content_type: string;
  /** The lowest role that may read it by id: the floor of the tool that first produced it. */
  rbac_floor: Role;
}

/**
 * Content-addressed, write-once evidence in Blob storage. The blob's name is the SHA-256 of its
 * bytes, written only if absent (`If-None-Match: *`), so a stored artifact can never be replaced:
 * a second write of the same bytes finds it there and changes nothing.
 */
export interface EvidenceStore {
  /** Stores `bytes` (if absent) readable from `rbacFloor` up; bytes already stored keep the floor they were first stored with. */
  put(bytes: Uint8Array, contentType: string, rbacFloor: Role): Promise<EvidenceReference>;
  /** The reference (floor, type, size) of one piece of evidence without its bytes, so a role can be checked before any download. */
  describe(evidenceId: string): Promise<EvidenceReference | undefined>;
  /** The bytes and content type of one piece of evidence, or undefined when there is none by that id. */
  get(evidenceId: string): Promise<{ reference: EvidenceReference; bytes: Buffer } | undefined>;
}

const blobName = (sha256: string) => `sha256/${sha256}`;

/** The stored floor; evidence without a readable one is the Owner's alone. */
function floorOf(metadata: Record<string, string> | undefined): Role {
  const floor = metadata?.rbac_floor;
  return ROLES.find((role) => role === floor) ?? "Owner";
}

function statusOf(error: unknown): number | undefined {
  return typeof error === "object" && error !== null && "statusCode" in error
    ? Number((error as { statusCode: unknown }).statusCode)
    : undefined;
}

/** Opens the store over a container (created on first write). */
export function createEvidenceStore(container: () => Promise<ContainerClient>): EvidenceStore {
  let ready: Promise<ContainerClient> | undefined;
  const open = () => {
    ready ??= container().then(
      async (c) => {
        await c.createIfNotExists();
        return c;
      },
      (error: unknown) => {
        ready = undefined;
        throw error;
      },
    );
    return ready;
  };
  return {
    async put(bytes, contentType, rbacFloor) {
      const sha256 = createHash("sha256").update(bytes).digest("hex");
      const blob = (await open()).getBlockBlobClient(blobName(sha256));
      try {
        await blob.uploadData(bytes, {
          blobHTTPHeaders: { blobContentType: contentType },
          metadata: { rbac_floor: rbacFloor },
          conditions: { ifNoneMatch: "*" },
        });
        return {
          evidence_id: `sha256-${sha256}`,
          sha256,
          size: bytes.byteLength,
          content_type: contentType,
          rbac_floor: rbacFloor,
        };
      } catch (error) {
        // Already there: the same name holds the same bytes, and it is never overwritten.
        if (statusOf(error) !== 409 && statusOf(error) !== 412) throw error;
        const properties = await blob.getProperties();
        return {
          evidence_id: `sha256-${sha256}`,
          sha256,
          size: bytes.byteLength,
          content_type: properties.contentType ?? contentType,
          rbac_floor: floorOf(properties.metadata),
        };
      }
    },
    async describe(evidenceId) {
      if (!EVIDENCE_ID_PATTERN.test(evidenceId)) return undefined;
      const sha256 = evidenceId.slice("sha256-".length);
      try {
        const properties = await (await open()).getBlockBlobClient(blobName(sha256)).getProperties();
        return {
          evidence_id: evidenceId,
          sha256,
          size: properties.contentLength ?? 0,
          content_type: properties.contentType ?? "application/octet-stream",
          rbac_floor: floorOf(properties.metadata),
        };
      } catch (error) {
        if (statusOf(error) === 404) return undefined;
        throw error;
      }
    },
    async get(evidenceId) {
      if (!EVIDENCE_ID_PATTERN.test(evidenceId)) return undefined;
      const sha256 = evidenceId.slice("sha256-".length);
      const blob = (await open()).getBlockBlobClient(blobName(sha256));
      try {
        const bytes = await blob.downloadToBuffer();
        const properties = await blob.getProperties();
        // The address is the digest: bytes that do not match it are not the evidence.
        if (createHash("sha256").update(bytes).digest("hex") !== sha256)
          throw new Error(`evidence ${evidenceId} does not match its digest`);
        return {
          reference: {
            evidence_id: evidenceId,
            sha256,
            size: bytes.byteLength,
            content_type: properties.contentType ?? "application/octet-stream",
            rbac_floor: floorOf(properties.metadata),
          },
          bytes,
        };
      } catch (error) {
        if (statusOf(error) === 404) return undefined;
        throw error;
      }
    },
  };
}
