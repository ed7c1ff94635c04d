import { ValidationError } from "../errors.js";

const GIB = 1024 ** 3;

/**
 * Memory (GiB) and vCPUs of the VM sizes the BLAST pool is usually built from. A size not listed
 * here is accepted without the memory check (Azure knows more sizes than this table).
 */
export const VM_SIZES: Readonly<Record<string, { memoryGiB: number; vcpus: number }>> = Object.freeze({
  Standard_B2s: { memoryGiB: 4, vcpus: 2 },
  Standard_D2s_v5: { memoryGiB: 8, vcpus: 2 },
  Standard_D4s_v5: { memoryGiB: 16, vcpus: 4 },
  Standard_D8s_v5: { memoryGiB: 32, vcpus: 8 },
  Standard_D16s_v5: { memoryGiB: 64, vcpus: 16 },
  Standard_D32s_v5: { memoryGiB: 128, vcpus: 32 },
  Standard_E2s_v5: { memoryGiB: 16, vcpus: 2 },
  Standard_E4s_v5: { memoryGiB: 32, vcpus: 4 },
  Standard_E8s_v5: { memoryGiB: 64, vcpus: 8 },
  Standard_E16s_v5: { memoryGiB: 128, vcpus: 16 },
  Standard_E32s_v5: { memoryGiB: 256, vcpus: 32 },
  Standard_E48s_v5: { memoryGiB: 384, vcpus: 48 },
  Standard_E64s_v5: { memoryGiB: 512, vcpus: 64 },
  Standard_E96s_v5: { memoryGiB: 672, vcpus: 96 },
});

/**
 * Memory a node of `memoryBytes` leaves to pods: AKS reserves kube-reserved memory (25% of the
 * first 4 GiB, 20% of the next 4, 10% of the next 8, 6% of the next 112, 2% above 128 GiB) and
 * keeps 100 MiB for the eviction threshold.
 */
export function allocatableBytes(memoryBytes: number): number {
  const tiers: [number, number][] = [
    [4 * GIB, 0.25],
    [4 * GIB, 0.2],
    [8 * GIB, 0.1],
    [112 * GIB, 0.06],
    [Number.POSITIVE_INFINITY, 0.02],
  ];
  let left = memoryBytes;
  let reserved = 0;
  for (const [size, share] of tiers) {
    const part = Math.min(left, size);
    reserved += part * share;
    left -= part;
    if (left <= 0) break;
  }
  return Math.max(0, Math.floor(memoryBytes - reserved - 100 * 1024 ** 2));
}

/** A database's memory need: what a full (unsharded) search must cache. */
export interface DatabaseMemoryNeed {
  name: string;
  bytesToCache: number;
}

/** Whether a BLAST node of `vmSize` holds the largest prepared database for a full search. */
export interface NodeSizeFit {
  /** The largest prepared database, or null when none is prepared. */
  largest: DatabaseMemoryNeed | null;
  /** Memory a node of the size leaves to pods, or null for a size the table does not know. */
  usableBytes: number | null;
  fits: boolean;
  /** Why it does not fit, with the spec's remedies (absent when it fits). */
  message?: string;
}

/** The memory rule of spec §7 (§8: a database of about 250 GB needs a node with about 256 GB), as a value. */
export function nodeSizeFit(vmSize: string, databases: readonly DatabaseMemoryNeed[]): NodeSizeFit {
  const size = VM_SIZES[vmSize];
  const largest = databases.length ? databases.reduce((a, b) => (b.bytesToCache > a.bytesToCache ? b : a)) : null;
  const usable = size ? allocatableBytes(size.memoryGiB * GIB) : null;
  if (!size || !largest || usable === null || largest.bytesToCache <= usable)
    return { largest, usableBytes: usable, fits: true };
  const gib = (n: number) => `${(n / GIB).toFixed(1)} GiB`;
  const bigger = Object.entries(VM_SIZES).find(
    ([, s]) => allocatableBytes(s.memoryGiB * GIB) >= largest.bytesToCache,
  )?.[0];
  return {
    largest,
    usableBytes: usable,
    fits: false,
    message:
      `database memory requirements of ${largest.name} (${gib(largest.bytesToCache)} to cache) exceed the machine type's memory ` +
      `(${vmSize}: ${gib(usable)} usable of ${size.memoryGiB} GiB). Remedies: provision the BLAST pool with a larger machine type` +
      `${bigger ? ` such as ${bigger}` : ""}, search with the sharded execution profile, or choose a smaller database.`,
  };
}

/**
 * Refuses (422 on `node_size`) a BLAST pool whose nodes could not hold the largest prepared
 * database for a full search, with the spec's memory rule and its remedies ({@link nodeSizeFit}).
 */
export function requireNodeSizeFits(vmSize: string, databases: readonly DatabaseMemoryNeed[]): void {
  const fit = nodeSizeFit(vmSize, databases);
  if (fit.fits) return;
  throw new ValidationError([{ loc: ["body", "node_size"], msg: fit.message ?? "", type: "value_error" }]);
}
