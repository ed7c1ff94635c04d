import { createHash } from "node:crypto";
import { readdir, readFile, stat } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { gzip } from "node:zlib";

/** A packed build context: the gzipped tar the registry builds from, and its digest. */
export interface BuildContext {
  bytes: Buffer;
  /** `sha256:<hex>` of `bytes`: the same sources give the same digest (entries sorted, times zero). */
  digest: string;
  files: number;
}

/** The build context may not exceed this (ACR's limit for an uploaded source is far larger; ours is a few MiB). */
export const MAX_CONTEXT_BYTES = 256 * 1024 * 1024;

/**
 * `.dockerignore` as Docker reads it, for the patterns this repository uses: a name or path
 * (`node_modules`, `web/node_modules`) excludes that entry and everything under it; `*` and `?`
 * match within one path segment; `**` matches any number of segments; `!` re-includes.
 */
export function dockerIgnore(text: string): (relative: string) => boolean {
  const rules = text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith("#"))
    .map((line) => {
      const negate = line.startsWith("!");
      const pattern = (negate ? line.slice(1) : line).replace(/^\/+|\/+$/g, "");
      const source = pattern
        .split("/")
        .map((segment) =>
          segment === "**"
            ? ".*"
            : segment
                .replace(/[.+^${}()|[\]\\]/g, "\\$&")
                .replace(/\*/g, "[^/]*")
                .replace(/\?/g, "[^/]"),
        )
        .join("/");
      return { negate, regex: new RegExp(`^${source}(/.*)?$`) };
    });
  return (relative) => {
    let ignored = false;
    for (const rule of rules) if (rule.regex.test(relative)) ignored = !rule.negate;
    return ignored;
  };
}

/** One ustar header block for a regular file (mode 0644, owner 0, time 0: the bytes depend on the content only). */
function tarHeader(name: string, size: number): Buffer {
  const header = Buffer.alloc(512);
  let prefix = "";
  let base = name;
  if (Buffer.byteLength(name) > 100) {
    const cut = name.lastIndexOf("/", 155);
    if (cut <= 0 || Buffer.byteLength(name.slice(cut + 1)) > 100)
      throw new Error(`path too long for the build context: ${name}`);
    prefix = name.slice(0, cut);
    base = name.slice(cut + 1);
  }
  const octal = (value: number, length: number) => value.toString(8).padStart(length - 1, "0");
  header.write(base, 0, 100, "utf8");
  header.write(octal(0o644, 8), 100, 8, "ascii");
  header.write(octal(0, 8), 108, 8, "ascii");
  header.write(octal(0, 8), 116, 8, "ascii");
  header.write(octal(size, 12), 124, 12, "ascii");
  header.write(octal(0, 12), 136, 12, "ascii");
  header.fill(" ", 148, 156);
  header.write("0", 156, 1, "ascii");
  header.write("ustar\u000000", 257, 8, "ascii");
  header.write(prefix, 345, 155, "utf8");
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${octal(sum, 7)}\u0000 `, 148, 8, "ascii");
  return header;
}

/** The file names of a gzipped ustar archive (what the local registry reads to find the Dockerfile). */
export function tarEntries(tar: Buffer): string[] {
  const names: string[] = [];
  for (let offset = 0; offset + 512 <= tar.length; ) {
    const header = tar.subarray(offset, offset + 512);
    if (header.every((b) => b === 0)) break;
    const text = (start: number, length: number) =>
      header.toString("utf8", start, start + length).replace(/\0.*$/s, "");
    const prefix = text(345, 155);
    names.push(prefix ? `${prefix}/${text(0, 100)}` : text(0, 100));
    const size = Number.parseInt(text(124, 12).trim() || "0", 8);
    offset += 512 + Math.ceil(size / 512) * 512;
  }
  return names;
}

/**
 * Packs `dir` as the registry's build context: every regular file `.dockerignore` admits, sorted,
 * in a gzipped ustar archive whose bytes depend only on the files' paths and contents.
 */
export async function packBuildContext(dir: string): Promise<BuildContext> {
  const ignoreText = await readFile(path.join(dir, ".dockerignore"), "utf8").catch(() => "");
  const ignored = dockerIgnore(ignoreText);
  const files: string[] = [];
  const walk = async (relative: string) => {
    const entries = await readdir(path.join(dir, relative), { withFileTypes: true });
    for (const entry of entries) {
      const child = relative ? `${relative}/${entry.name}` : entry.name;
      if (ignored(child)) continue;
      if (entry.isDirectory()) await walk(child);
      else if (entry.isFile()) files.push(child);
    }
  };
  await walk("");
  files.sort();
  const blocks: Buffer[] = [];
  let total = 0;
  for (const file of files) {
    const content = await readFile(path.join(dir, file));
    total += content.length;
    if (total > MAX_CONTEXT_BYTES) throw new Error(`the build context in ${dir} exceeds ${MAX_CONTEXT_BYTES} bytes`);
    blocks.push(tarHeader(file, content.length), content, Buffer.alloc((512 - (content.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  // gzip's header carries no time when none is given (mtime 0): same files, same bytes.
  const bytes = await promisify(gzip)(Buffer.concat(blocks), { level: 9 });
  return { bytes, digest: `sha256:${createHash("sha256").update(bytes).digest("hex")}`, files: files.length };
}

/** True when `dir` exists and is a folder. */
export async function isFolder(dir: string): Promise<boolean> {
  return stat(dir).then(
    (s) => s.isDirectory(),
    () => false,
  );
}
