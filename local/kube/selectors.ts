/**
 * Label and field selectors as the Kubernetes API server reads them: `a=b`, `a==b`, `a!=b`,
 * `a in (x,y)`, `a notin (x)`, `a`, `!a` for labels; `path=value`, `path!=value` for fields.
 */
export type Selector = (obj: KubeObject) => boolean;

/** Any API object: only `metadata` is known here. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: KubeMeta;
  [key: string]: unknown;
}

export interface KubeMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  generateName?: string;
  [key: string]: unknown;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** A selector string could not be parsed; the API server answers 400 BadRequest. */
export class SelectorError extends Error {}

/** Splits on commas outside parentheses. */
function terms(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let current = "";
  for (const c of text) {
    if (c === "(") depth++;
    if (c === ")") depth--;
    if (c === "," && depth === 0) {
      out.push(current.trim());
      current = "";
    } else current += c;
  }
  if (current.trim() !== "") out.push(current.trim());
  return out.filter((t) => t !== "");
}

const KEY = /^[A-Za-z0-9]([A-Za-z0-9_./-]*[A-Za-z0-9])?$/;

function key(text: string, selector: string): string {
  const k = text.trim();
  if (!KEY.test(k))
    throw new SelectorError(`unable to parse requirement: invalid label key "${k}" in selector "${selector}"`);
  return k;
}

/** Parses a label selector; an empty one matches everything. */
export function parseLabelSelector(text: string | undefined): Selector {
  if (!text) return () => true;
  const checks = terms(text).map((term): ((labels: Record<string, string>) => boolean) => {
    const set = /^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(term);
    if (set) {
      const k = key(set[1] ?? "", text);
      const values = new Set((set[3] ?? "").split(",").map((v) => v.trim()));
      return set[2] === "in"
        ? (l) => l[k] !== undefined && values.has(l[k])
        : (l) => l[k] === undefined || !values.has(l[k]);
    }
    const cmp = /^([^!=]+?)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (cmp) {
      const k = key(cmp[1] ?? "", text);
      const v = (cmp[3] ?? "").trim();
      return cmp[2] === "!=" ? (l) => l[k] !== v : (l) => l[k] === v;
    }
    if (term.startsWith("!")) {
      const k = key(term.slice(1), text);
      return (l) => l[k] === undefined;
    }
    const k = key(term, text);
    return (l) => l[k] !== undefined;
  });
  return (obj) => {
    const labels = obj.metadata.labels ?? {};
    return checks.every((check) => check(labels));
  };
}

/** The value at a dotted path (`spec.nodeName`), as a string ("" when absent). */
function fieldValue(obj: KubeObject, dotted: string): string {
  let value: unknown = obj;
  for (const part of dotted.split(".")) {
    if (value === null || typeof value !== "object") return "";
    value = (value as Record<string, unknown>)[part];
  }
  return value === undefined || value === null ? "" : String(value);
}

/** Parses a field selector (`metadata.name=x,status.phase!=Failed`); empty matches everything. */
export function parseFieldSelector(text: string | undefined): Selector {
  if (!text) return () => true;
  const checks = terms(text).map((term) => {
    const cmp = /^([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (!cmp) throw new SelectorError(`invalid field selector "${text}"`);
    const path = cmp[1] ?? "";
    const v = (cmp[3] ?? "").trim();
    return cmp[2] === "!="
      ? (o: KubeObject) => fieldValue(o, path) !== v
      : (o: KubeObject) => fieldValue(o, path) === v;
  });
  return (obj) => checks.every((check) => check(obj));
}
