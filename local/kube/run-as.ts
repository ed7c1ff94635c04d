import { readFileSync, realpathSync, statSync } from "node:fs";
import path from "node:path";
import { type Any, field } from "./objects.js";
import type { KubeObject } from "./selectors.js";

/** The user the local kubelet itself runs as (its containers' "image user"). */
export interface KubeletUser {
  uid: number;
  gid: number;
  /** The image's passwd lookup (default: this machine's /etc/passwd); tests give their own. */
  passwdGroupOf?: (uid: number) => number | undefined;
}

/** The identity a container's process runs with, from its securityContext over its pod's. */
export interface ContainerIdentity {
  uid: number;
  gid: number;
  /** Supplementary groups: the pod's `fsGroup`, then its `supplementalGroups`. */
  groups: number[];
  /** The group that owns the pod's emptyDir volumes (`fsGroup`, else the container's gid). */
  volumeGid: number;
  /** True when the process runs as another user or group than the kubelet's (the kubelet is root). */
  switched: boolean;
  /** `allowPrivilegeEscalation: false`: the process runs with no_new_privs. */
  noNewPrivileges: boolean;
}

/** Why the kubelet does not start a container (the waiting reason and message, as a kubelet reports them). */
export interface ContainerRefusal {
  reason: "CreateContainerConfigError" | "CreateContainerError";
  message: string;
}

/** The kubelet's own user (on a platform without uids, one that never switches). */
export function currentKubeletUser(): KubeletUser {
  return { uid: process.getuid?.() ?? -1, gid: process.getgid?.() ?? -1 };
}

/** The primary group of `uid` in this machine's passwd file (the local "image"), if it has an entry. */
export function passwdGroupOf(uid: number, passwd = "/etc/passwd"): number | undefined {
  try {
    for (const line of readFileSync(passwd, "utf8").split("\n")) {
      const fields = line.split(":");
      if (fields.length >= 4 && fields[2] === String(uid) && /^\d+$/.test(fields[3] ?? "")) return Number(fields[3]);
    }
  } catch {
    // No passwd file: no entry.
  }
  return undefined;
}

function isId(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 && value <= 0xfffffffe;
}

/**
 * The uid, gid and groups a container runs as, or why it cannot run (Kubernetes' rules and, where
 * Kubernetes has one, its message):
 *
 * - `runAsUser`, `runAsGroup`, `runAsNonRoot` and `allowPrivilegeEscalation` of the container
 *   override the pod's; `fsGroup` and `supplementalGroups` are the pod's.
 * - Without `runAsUser` the image's user runs it; locally the image is this machine, whose user is
 *   the kubelet's. Without `runAsGroup`, a container given another uid runs with that uid's primary
 *   group in the image's passwd file (here /etc/passwd), or gid 0 when it has no entry, as a runtime does.
 * - `runAsNonRoot` refuses uid 0, whether it is asked for or would come from the image.
 * - Another uid or gid than the kubelet's needs a kubelet that can switch users (root). One that
 *   cannot refuses the pod and says so, rather than run it as someone else than it asked for.
 */
export function containerIdentity(
  pod: KubeObject,
  container: Any,
  kubelet: KubeletUser,
  where: string,
): ContainerIdentity | ContainerRefusal {
  const podContext = field<Any>(pod, "spec", "securityContext") ?? {};
  const own = (container.securityContext as Any | undefined) ?? {};
  const pick = (key: string): unknown => own[key] ?? podContext[key];
  const runAsUser = pick("runAsUser");
  const runAsGroup = pick("runAsGroup");
  const fsGroup = podContext.fsGroup;
  const supplemental = podContext.supplementalGroups;
  for (const [name, value] of [
    ["runAsUser", runAsUser],
    ["runAsGroup", runAsGroup],
    ["fsGroup", fsGroup],
  ] as const) {
    if (value !== undefined && !isId(value))
      return { reason: "CreateContainerConfigError", message: `invalid ${name} ${JSON.stringify(value)} ${where}` };
  }
  if (supplemental !== undefined && !(Array.isArray(supplemental) && supplemental.every(isId)))
    return {
      reason: "CreateContainerConfigError",
      message: `invalid supplementalGroups ${JSON.stringify(supplemental)} ${where}`,
    };
  if (pick("runAsNonRoot") === true) {
    if (runAsUser === 0)
      return { reason: "CreateContainerConfigError", message: `container's runAsUser breaks non-root policy ${where}` };
    if (runAsUser === undefined && kubelet.uid === 0)
      return {
        reason: "CreateContainerConfigError",
        message: `container has runAsNonRoot and image will run as root ${where}`,
      };
  }
  const uid = (runAsUser as number | undefined) ?? kubelet.uid;
  const gid =
    (runAsGroup as number | undefined) ??
    (uid === kubelet.uid ? kubelet.gid : ((kubelet.passwdGroupOf ?? passwdGroupOf)(uid) ?? 0));
  const groups = [
    ...new Set([...(fsGroup === undefined ? [] : [fsGroup as number]), ...((supplemental as number[]) ?? [])]),
  ];
  const noNewPrivileges = pick("allowPrivilegeEscalation") === false;
  if (kubelet.uid !== 0) {
    if (uid !== kubelet.uid || gid !== kubelet.gid)
      return {
        reason: "CreateContainerConfigError",
        message:
          `the local kubelet runs as uid ${kubelet.uid} gid ${kubelet.gid} and cannot start a container as uid ${uid} ` +
          `gid ${gid}: only a kubelet running as root switches users ${where}`,
      };
    // Not root: the process keeps the kubelet's own groups (it cannot take others).
    return { uid, gid, groups: [], volumeGid: gid, switched: false, noNewPrivileges };
  }
  const switched = uid !== kubelet.uid || gid !== kubelet.gid || groups.length > 0;
  return { uid, gid, groups, volumeGid: (fsGroup as number | undefined) ?? gid, switched, noNewPrivileges };
}

/** True when `value` is a refusal rather than an identity. */
export function isRefusal(value: ContainerIdentity | ContainerRefusal): value is ContainerRefusal {
  return "reason" in value;
}

/**
 * Whether `identity` may use `target` in `mode` by its permission bits (`r`, `w`, `x` letters), with
 * search (`x`) on every folder above it. ACLs are not read: where they grant more, this says no.
 */
export function permits(
  identity: Pick<ContainerIdentity, "uid" | "gid" | "groups">,
  target: string,
  mode: string,
): boolean {
  if (identity.uid === 0) return true;
  const allows = (file: string, wanted: string): boolean => {
    const st = statSync(file);
    const shift = st.uid === identity.uid ? 6 : st.gid === identity.gid || identity.groups.includes(st.gid) ? 3 : 0;
    const bits = (st.mode >> shift) & 7;
    return [...wanted].every((letter) => (bits & (letter === "r" ? 4 : letter === "w" ? 2 : 1)) !== 0);
  };
  try {
    const absolute = realpathSync(path.resolve(target));
    let dir = path.dirname(absolute);
    const ancestors: string[] = [];
    while (dir !== path.dirname(dir)) {
      ancestors.push(dir);
      dir = path.dirname(dir);
    }
    ancestors.push(dir);
    return ancestors.every((a) => allows(a, "x")) && allows(absolute, mode);
  } catch {
    return false;
  }
}
