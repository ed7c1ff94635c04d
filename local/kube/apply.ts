import type { Any } from "./objects.js";
import { timestamp } from "./objects.js";
import type { KubeObject } from "./selectors.js";
import { KubeStatusError } from "./store.js";

/**
 * Server-side apply and field ownership (`metadata.managedFields`), enough of Kubernetes' structured
 * merge for what the product applies: every write records which manager set which fields; an apply
 * that would change a field another manager owns is refused with 409 Conflict (reason
 * `FieldManagerConflict` per field) unless `force`, which takes the field over.
 *
 * Simplification against the real API server: lists are atomic (one field each, the whole list),
 * where Kubernetes merges lists of containers, ports and env by their keys. The manifests the
 * product applies own their lists whole, so the conflicts it meets are the same.
 */

/** One field path (`spec`, `replicas`). */
type FieldPath = string[];

/** One entry of `metadata.managedFields`. */
export interface ManagedFieldsEntry {
  manager: string;
  operation: "Apply" | "Update";
  apiVersion: string;
  time: string;
  fieldsType: "FieldsV1";
  fieldsV1: Any;
  subresource?: string;
}

// Identity and bookkeeping fields no manager owns.
const UNOWNED_METADATA = new Set([
  "name",
  "namespace",
  "uid",
  "resourceVersion",
  "generation",
  "creationTimestamp",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
  "managedFields",
  "selfLink",
  "generateName",
]);

const isMap = (v: unknown): v is Any => v !== null && typeof v === "object" && !Array.isArray(v);

/** The leaf fields an object sets (a non-empty map is walked; lists, scalars and empty maps are leaves). */
export function leafPaths(obj: KubeObject | Any): FieldPath[] {
  const out: FieldPath[] = [];
  const walk = (value: unknown, at: FieldPath) => {
    if (isMap(value) && Object.keys(value).length > 0) {
      for (const [k, v] of Object.entries(value)) walk(v, [...at, k]);
    } else out.push(at);
  };
  for (const [k, v] of Object.entries(obj)) {
    if (k === "apiVersion" || k === "kind" || k === "status") continue;
    if (k === "metadata" && isMap(v)) {
      for (const [mk, mv] of Object.entries(v)) if (!UNOWNED_METADATA.has(mk)) walk(mv, ["metadata", mk]);
      continue;
    }
    walk(v, [k]);
  }
  return out;
}

const keyOf = (p: FieldPath) => p.join("\u0000");
const pathOf = (key: string): FieldPath => key.split("\u0000");

function valueAt(obj: unknown, p: FieldPath): unknown {
  let v = obj;
  for (const k of p) {
    if (!isMap(v)) return undefined;
    v = v[k];
  }
  return v;
}

function removeAt(obj: Any, p: FieldPath): void {
  const parents: Any[] = [];
  let v: unknown = obj;
  for (const k of p.slice(0, -1)) {
    if (!isMap(v)) return;
    parents.push(v);
    v = v[k];
  }
  if (!isMap(v)) return;
  delete v[p.at(-1) as string];
  // Maps left empty by the removal go too (their own field was implied by the child's).
  for (let i = p.length - 2; i >= 0; i--) {
    const parent = parents[i] as Any;
    const child = parent[p[i] as string];
    if (isMap(child) && Object.keys(child).length === 0) delete parent[p[i] as string];
    else break;
  }
}

/** `{"f:spec":{"f:replicas":{}}}` from the paths. */
export function toFieldsV1(paths: Iterable<FieldPath>): Any {
  const root: Any = {};
  for (const p of paths) {
    let node = root;
    for (const k of p) {
      const key = `f:${k}`;
      node[key] ??= {};
      node = node[key] as Any;
    }
  }
  return root;
}

/** The leaf paths of a `fieldsV1` set. */
export function fromFieldsV1(set: unknown): FieldPath[] {
  const out: FieldPath[] = [];
  const walk = (node: unknown, at: FieldPath) => {
    const children = isMap(node) ? Object.keys(node).filter((k) => k.startsWith("f:")) : [];
    if (children.length === 0) {
      if (at.length > 0) out.push(at);
      return;
    }
    for (const k of children) walk((node as Any)[k], [...at, k.slice(2)]);
  };
  walk(set, []);
  return out;
}

function entriesOf(obj: KubeObject | undefined): ManagedFieldsEntry[] {
  const list = obj?.metadata.managedFields;
  return Array.isArray(list) ? (structuredClone(list) as ManagedFieldsEntry[]) : [];
}

const equal = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** Field sets (keys) of each entry, and the rest of the entry. */
function ownership(entries: ManagedFieldsEntry[]): { entry: ManagedFieldsEntry; keys: Set<string> }[] {
  return entries.map((entry) => ({ entry, keys: new Set(fromFieldsV1(entry.fieldsV1).map(keyOf)) }));
}

function rebuild(
  owners: { entry: ManagedFieldsEntry; keys: Set<string> }[],
  changed: Set<ManagedFieldsEntry>,
): ManagedFieldsEntry[] {
  return owners
    .filter((o) => o.keys.size > 0)
    .map((o) =>
      changed.has(o.entry)
        ? { ...o.entry, time: timestamp(), fieldsV1: toFieldsV1([...o.keys].map(pathOf)) }
        : { ...o.entry, fieldsV1: toFieldsV1([...o.keys].map(pathOf)) },
    );
}

function deepMerge(target: unknown, patch: unknown): unknown {
  if (!isMap(patch)) return structuredClone(patch);
  const out: Any = isMap(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) out[k] = deepMerge(out[k], v);
  return out;
}

/** What {@link applyConfiguration} decided. */
export interface ApplyResult {
  object: KubeObject;
  managedFields: ManagedFieldsEntry[];
}

/**
 * Applies `config` for `manager` onto `current` (undefined: the object is new). Fields this manager
 * applied before and leaves out now are removed (unless another manager owns them too); fields
 * another manager owns with a different value are a 409 Conflict, unless `force`.
 */
export function applyConfiguration(
  current: KubeObject | undefined,
  config: KubeObject,
  options: { manager: string; force: boolean; apiVersion: string; kind: string; resource: string },
): ApplyResult {
  const applied = leafPaths(config);
  const appliedKeys = new Set(applied.map(keyOf));
  const owners = ownership(entriesOf(current));
  const mine = owners.find((o) => o.entry.manager === options.manager && o.entry.operation === "Apply");
  const changed = new Set<ManagedFieldsEntry>();
  const conflicts: { manager: string; apiVersion: string; path: FieldPath }[] = [];
  for (const p of applied) {
    const k = keyOf(p);
    const differs = current !== undefined && !equal(valueAt(current, p), valueAt(config, p));
    for (const o of owners) {
      if (o === mine || !o.keys.has(k) || !differs) continue;
      if (options.force) {
        o.keys.delete(k);
        changed.add(o.entry);
      } else conflicts.push({ manager: o.entry.manager, apiVersion: o.entry.apiVersion, path: p });
    }
  }
  if (conflicts.length > 0) throw applyConflict(config, options, conflicts);
  let object = (current ? structuredClone(current) : { metadata: {} }) as KubeObject;
  // Fields this manager gave up: removed, unless someone else still holds them.
  if (mine && current) {
    for (const k of mine.keys) {
      if (appliedKeys.has(k)) continue;
      if (owners.some((o) => o !== mine && o.keys.has(k))) continue;
      removeAt(object as unknown as Any, pathOf(k));
    }
  }
  object = deepMerge(object, { ...config, metadata: { ...config.metadata } }) as KubeObject;
  object.apiVersion = options.apiVersion;
  object.kind = options.kind;
  if (mine) {
    if (!equal([...mine.keys].sort(), [...appliedKeys].sort())) changed.add(mine.entry);
    mine.keys = appliedKeys;
  } else {
    const entry: ManagedFieldsEntry = {
      manager: options.manager,
      operation: "Apply",
      apiVersion: options.apiVersion,
      time: timestamp(),
      fieldsType: "FieldsV1",
      fieldsV1: {},
    };
    owners.push({ entry, keys: appliedKeys });
    changed.add(entry);
  }
  return { object, managedFields: rebuild(owners, changed) };
}

/**
 * Ownership after a plain write (create, update, merge patch) by `manager`: the fields it changed
 * become its own (operation `Update`) and nobody else's; fields the write removed are nobody's.
 */
export function recordUpdate(
  previous: KubeObject | undefined,
  next: KubeObject,
  manager: string,
  apiVersion: string,
): ManagedFieldsEntry[] {
  const owners = ownership(entriesOf(previous));
  const changed = new Set<ManagedFieldsEntry>();
  const nextKeys = new Set(leafPaths(next).map(keyOf));
  const touched = [...nextKeys].filter(
    (k) => !previous || !equal(valueAt(previous, pathOf(k)), valueAt(next, pathOf(k))),
  );
  for (const o of owners) {
    for (const k of [...o.keys]) {
      if (!nextKeys.has(k) || (touched.includes(k) && o.entry.manager !== manager)) {
        o.keys.delete(k);
        changed.add(o.entry);
      }
    }
  }
  if (touched.length > 0) {
    let mine = owners.find((o) => o.entry.manager === manager && o.entry.operation === "Update");
    if (!mine) {
      mine = {
        entry: { manager, operation: "Update", apiVersion, time: timestamp(), fieldsType: "FieldsV1", fieldsV1: {} },
        keys: new Set(),
      };
      owners.push(mine);
    }
    for (const k of touched) mine.keys.add(k);
    changed.add(mine.entry);
  }
  return rebuild(owners, changed);
}

function applyConflict(
  config: KubeObject,
  options: { kind: string; resource: string },
  conflicts: { manager: string; apiVersion: string; path: FieldPath }[],
): KubeStatusError {
  const causes = conflicts.map((c) => ({
    reason: "FieldManagerConflict",
    message: `conflict with "${c.manager}" using ${c.apiVersion}`,
    field: `.${c.path.join(".")}`,
  }));
  const lines = causes.map((c) => `${c.message}: ${c.field}`).join("\n- ");
  const n = conflicts.length;
  return new KubeStatusError(
    409,
    "Conflict",
    `Apply failed with ${n} conflict${n === 1 ? "" : "s"}: ${n === 1 ? lines : `\n- ${lines}`}`,
    { name: config.metadata?.name, kind: options.resource, causes },
  );
}

/** The manager of a plain write: `fieldManager`, else the client's program name from its User-Agent (as Kubernetes does). */
export function updateManager(fieldManager: string | null, userAgent: string | undefined): string {
  if (fieldManager) return fieldManager;
  const program = (userAgent ?? "").split("/")[0]?.trim();
  return program || "unknown";
}

/** Checks the apply request's parameters as the API server does (400 when a field manager is missing). */
export function checkFieldManager(fieldManager: string | null, apply: boolean): void {
  if (apply && !fieldManager)
    throw new KubeStatusError(
      400,
      "BadRequest",
      'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
    );
  if (fieldManager && fieldManager.length > 128)
    throw new KubeStatusError(
      422,
      "Invalid",
      `PatchOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more than 128 bytes`,
    );
}

export function isMapValue(v: unknown): v is Any {
  return isMap(v);
}
