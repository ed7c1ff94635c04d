/**
 * Kubernetes resource quantities (`512Mi`, `2`, `500m`, `1e9`, `1G`), as the API server reads
 * them in `resources.requests`/`limits` and node `allocatable`.
 */
const SUFFIX: Record<string, number> = {
  "": 1,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 1024,
  Mi: 1024 ** 2,
  Gi: 1024 ** 3,
  Ti: 1024 ** 4,
  Pi: 1024 ** 5,
  Ei: 1024 ** 6,
};

const QUANTITY = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)|[eE]([+-]?\d+))?$/;

/** The value of a quantity (bytes for memory, cores for CPU); undefined when it is not one. */
export function parseQuantity(text: string | number | undefined): number | undefined {
  if (typeof text === "number") return Number.isFinite(text) ? text : undefined;
  if (typeof text !== "string") return undefined;
  const m = QUANTITY.exec(text.trim());
  if (!m) return undefined;
  const base = Number(m[1]);
  if (m[3] !== undefined) return base * 10 ** Number(m[3]);
  return base * (SUFFIX[m[2] ?? ""] ?? 1);
}

/** Bytes as a memory quantity, rounded up to whole MiB (`1536Mi`). */
export function memoryQuantity(bytes: number): string {
  return `${Math.max(1, Math.ceil(bytes / 1024 ** 2))}Mi`;
}

/** Cores as a CPU quantity (`2`, `500m`). */
export function cpuQuantity(cores: number): string {
  const milli = Math.max(1, Math.round(cores * 1000));
  return milli % 1000 === 0 ? String(milli / 1000) : `${milli}m`;
}

/** Bytes for people: `1.5 GiB`, `300.0 MiB`. */
export function formatBytes(n: number): string {
  return n >= 1024 ** 3 ? `${(n / 1024 ** 3).toFixed(1)} GiB` : `${(n / 1024 ** 2).toFixed(1)} MiB`;
}
