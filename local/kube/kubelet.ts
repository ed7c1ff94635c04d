import { type ChildProcess, spawn } from "node:child_process";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import {
  accessSync,
  chmodSync,
  chownSync,
  closeSync,
  constants,
  copyFileSync,
  fchmodSync,
  fchownSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  statSync,
  writeSync,
} from "node:fs";
import { constants as osConstants, tmpdir } from "node:os";
import path from "node:path";
import { parseQuantity } from "../../shared/cluster/quantity.js";
import type { Logger } from "../../shared/logging/logger.js";
import type { Deleter } from "./deletion.js";
import { removeTree } from "./node-files.js";
import { type Any, type Condition, DNS_LABEL, field, recordEvent, setCondition, timestamp } from "./objects.js";
import type { KubeObject } from "./selectors.js";
import {
  type ContainerIdentity,
  containerIdentity,
  currentKubeletUser,
  isRefusal,
  type KubeletUser,
  permits,
} from "./run-as.js";
import type { ObjectStore } from "./store.js";

/** An image the local kubelet can "run": its working folder and environment on this machine. */
export interface LocalImage {
  /** Matches the image reference (`registry/blastplane-jobapi:tag`). */
  pattern: RegExp;
  /** The image's WORKDIR, here a local folder (the project's build). */
  workingDir: string;
  /** The image's CMD when the container gives no command. */
  cmd: string[];
  /**
   * What the image holds, relative to `workingDir` (e.g. `dist/jobapi`). A pod run as another user
   * gets these from a copy the kubelet keeps open to every user, as a runtime unpacks an image into
   * its own storage, when the project folder itself is closed to that user.
   */
  files?: string[];
}

export interface KubeletOptions {
  store: ObjectStore;
  deleter: Deleter;
  logger: Logger;
  /** emptyDir volumes and pod scratch folders go under `<rootDir>/pods/<uid>/`. */
  rootDir: string;
  images: LocalImage[];
  /** How often the memory of each container's process tree is measured. */
  memorySampleMs?: number;
  /** Delay before a container of a `restartPolicy: Always|OnFailure` pod restarts. */
  restartBackoffMs?: number;
  /** Log bytes kept per container (the oldest are dropped beyond it). */
  logLimitBytes?: number;
  /**
   * Where the folders of pods run as another user go (`<dir>/<uid>/`): outside `rootDir`, whose
   * data folder is 0700 to everyone but the kubelet's user. Default: a fresh folder (0711) under the
   * system's temporary folder, made when the first such pod starts and removed at stop.
   */
  userPodsDir?: string;
  /** The kubelet's own user (default: this process's); tests pose as another. */
  user?: KubeletUser;
  /**
   * What the node supplies a container beyond its spec (the local stack: what AKS would supply a
   * pod rendered for Azure, `local/kube/azure-stand-ins.ts`). Called before each start.
   */
  supplement?: ContainerSupplement;
}

/** What a {@link ContainerSupplement} is given: the container about to start, and a folder of its own. */
export interface SupplementInput {
  pod: KubeObject;
  container: Any;
  /** The container's environment as the kubelet built it from its spec. */
  env: Readonly<Record<string, string>>;
  /**
   * Makes (once per start of the container) and returns a folder for what the node supplies: a
   * fresh folder of the kubelet's (0750, group the container's volume group: the container reads
   * it, cannot change it), the previous start's removed. Write into it with {@link writeNewFile}.
   */
  dir: () => string;
  /** The container's uid and volume group when it runs as another user than the kubelet's (files to chown). */
  owner: { uid: number; gid: number } | undefined;
}

/**
 * Supplies a container what the node would beyond its spec: its environment to start with instead
 * (undefined: unchanged), and what to stop when the container ends.
 */
export type ContainerSupplement = (
  input: SupplementInput,
) => { env: Record<string, string>; stop?: () => void } | undefined;

/** A container's output, bounded, with followers for `kubectl logs -f`. */
export class LogBuffer {
  private chunks: Buffer[] = [];
  private bytes = 0;
  private readonly followers = new Set<(chunk: Buffer | null) => void>();
  ended = false;

  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    while (this.bytes > this.limit && this.chunks.length > 1) this.bytes -= (this.chunks.shift() as Buffer).length;
    for (const f of this.followers) f(chunk);
  }

  end(): void {
    this.ended = true;
    for (const f of this.followers) f(null);
    this.followers.clear();
  }

  text(): string {
    return Buffer.concat(this.chunks).toString("utf8");
  }

  /** Calls `on` with each new chunk, then with null at the end; returns the unsubscribe function. */
  follow(on: (chunk: Buffer | null) => void): () => void {
    if (this.ended) {
      on(null);
      return () => {};
    }
    this.followers.add(on);
    return () => this.followers.delete(on);
  }
}

interface Run {
  child: ChildProcess;
  oom: boolean;
  sampler?: NodeJS.Timeout;
  killTimer?: NodeJS.Timeout;
  /** The next readiness probe. */
  probeTimer?: NodeJS.Timeout;
  /** What the container's readiness probe last said (true from the start without a probe). */
  ready: boolean;
  startedAt: string;
}

/** One container of a pod: its own process, log, restarts and readiness. */
interface ContainerState {
  /** Its place in the pod's `spec.containers` (and `status.containerStatuses`). */
  index: number;
  name: string;
  logs: LogBuffer;
  run?: Run;
  retry?: NodeJS.Timeout;
  restarts: number;
  /** Stops what the node's supplement started for the container's current run. */
  stopSupplement?: () => void;
  /**
   * The kubelet's folders made for its last start (its secret volumes, what the node supplied):
   * removed when it starts again.
   */
  kubeletDirs?: string[];
}

interface PodState {
  uid: string;
  namespace: string;
  name: string;
  containers: ContainerState[];
  /** The pod object is gone from the store: nothing more is written about it. */
  removed: boolean;
  /**
   * Each port the pod listens on, and its port on this machine (no network namespace: the kubelet
   * gives each one a free port, shared by the pod's containers as their network namespace is).
   */
  hostPorts?: Map<number, number>;
  /** Free ports are being found for the pod: its containers start once they are. */
  portsPending?: boolean;
}

/** How often a container not yet ready is probed (a real kubelet waits `periodSeconds`: see {@link Kubelet}). */
const FIRST_READY_PROBE_MS = 1000;

/** `count` free TCP ports on the loopback interface. */
async function freeLoopbackPorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<net.Server>((resolve, reject) => {
          const server = net.createServer();
          server.once("error", reject);
          server.listen(0, "127.0.0.1", () => resolve(server));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

/** One HTTP GET: undefined when answered 200-399 within `timeoutMs` (a probe's success), else why not, as a kubelet says it. */
function httpProbe(url: string, timeoutMs: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    let req: http.ClientRequest;
    try {
      req = http.get(url, { timeout: timeoutMs, headers: { "User-Agent": "kube-probe/1.31" } }, (res) => {
        res.resume();
        const code = res.statusCode ?? 0;
        resolve(code >= 200 && code < 400 ? undefined : `HTTP probe failed with statuscode: ${code}`);
      });
    } catch (error) {
      // A URL http.get refuses (a path with characters it does not allow): a failed probe, not a crash.
      resolve(`Get "${url}": ${(error as Error).message}`);
      return;
    }
    req.once("timeout", () => req.destroy(new Error("context deadline exceeded")));
    req.once("error", (error) => resolve(`Get "${url}": ${error.message}`));
  });
}

/** A probe's `httpGet.path` as a kubelet requests it: Kubernetes accepts a path without its leading `/`. */
export function probePath(path: unknown): string {
  const text = typeof path === "string" ? path : "";
  return text.startsWith("/") ? text : `/${text}`;
}

/**
 * Whether an env variable names what the container listens on, and so is rewritten to this machine's
 * port or address: a name ending in `_PORT` (or `PORT`) whose value is a container port, a name
 * ending in `_HOST` (or `HOST`) whose value is `0.0.0.0` — as the job API's `JOBAPI_PORT` and
 * `JOBAPI_HOST` are. Any other value (a timeout or size that happens to equal a port) is left alone.
 */
export function listenEnvKind(name: string): "port" | "host" | undefined {
  if (/(^|_)PORT$/.test(name)) return "port";
  if (/(^|_)HOST$/.test(name)) return "host";
  return undefined;
}

const SETPRIV = findOnPath("setpriv");

function findOnPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    if (!dir) continue;
    try {
      accessSync(path.join(dir, name), constants.X_OK);
      return path.join(dir, name);
    } catch {
      // not here
    }
  }
  return undefined;
}

/** setpriv's arguments for a container's identity: its user, groups and no_new_privs. */
function setprivUser(identity: ContainerIdentity): string[] {
  const user = identity.switched
    ? [
        "--reuid",
        String(identity.uid),
        "--regid",
        String(identity.gid),
        ...(identity.groups.length > 0 ? ["--groups", identity.groups.join(",")] : ["--clear-groups"]),
      ]
    : [];
  return [...user, ...(identity.noNewPrivileges ? ["--no-new-privs"] : [])];
}

/** Resident memory of a process and all its descendants, from /proc (0 once it is gone). */
export function treeRssBytes(pid: number): number {
  let total = 0;
  const queue = [pid];
  const seen = new Set<number>();
  while (queue.length > 0) {
    const p = queue.pop() as number;
    if (seen.has(p)) continue;
    seen.add(p);
    try {
      const pages = Number(readFileSync(`/proc/${p}/statm`, "utf8").split(" ")[1]);
      total += pages * 4096;
      for (const task of readdirSync(`/proc/${p}/task`)) {
        queue.push(
          ...readFileSync(`/proc/${p}/task/${task}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number),
        );
      }
    } catch {
      // The process ended while being read.
    }
  }
  return total;
}

const READY_CONDITIONS = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady"];

/**
 * The kubelet of every simulated node: runs each container of a bound pod as a local process of
 * its own (its own log, restarts per the pod's `restartPolicy`, CrashLoopBackOff and readiness);
 * the pod is Ready while all of its containers are (`kubectl get pods` READY 2/2), Succeeded or
 * Failed once all have ended for good.
 *
 * - The image maps to this machine ({@link LocalImage}): its WORKDIR is the project folder and
 *   `node` is this Node binary; an unknown image is ErrImagePull, then ImagePullBackOff.
 * - Volumes: a `hostPath` is that folder, an `emptyDir` a fresh folder per pod, a `secret` a
 *   folder of the pod holding the Secret's keys as files (a missing Secret: the container waits). There is no mount
 *   namespace, so a mount path inside the container's command, args, env values and working dir
 *   is rewritten to the folder it mounts.
 * - Env: values, `secretKeyRef` (a missing secret is CreateContainerConfigError) and `fieldRef`.
 *   Nothing of this process's own environment passes but `PATH`. What the node supplies beyond the
 *   spec comes from the {@link KubeletOptions.supplement} (the local stack's Azure stand-ins).
 * - Network: no namespace; the pod's IP is 127.0.0.1 and each port the pod listens on (every
 *   container's ports, and a listen variable's port a container does not declare) gets a free port
 *   of this machine, kept while the pod lives and the same for all of its containers. A listen variable ({@link listenEnvKind}: `*_PORT`
 *   whose value is a container port, `*_HOST` whose value is `0.0.0.0`) is rewritten to that port
 *   or to 127.0.0.1, as mount paths are rewritten to folders; any other value is left alone.
 * - Readiness: an `httpGet` readiness probe is run against that port (see `probeReadiness`); the
 *   container is ready, and its pod Ready, only while it passes. Liveness probes are not run.
 * - Memory limits: the resident memory (RSS) of the container's whole process tree is measured
 *   every `memorySampleMs` (default 100 ms) from /proc; over the limit, the tree is SIGKILLed and
 *   the container terminates with reason OOMKilled, exit code 137 (a spike shorter than one
 *   sample can escape; cgroups would catch it, but they are not writable on every machine here).
 * - Users (`securityContext`, {@link containerIdentity}): `runAsNonRoot` refuses a container that
 *   would run as root; a container asking for another uid or gid than the kubelet's runs as that
 *   user (`setpriv --reuid --regid --groups`, so it holds no capability, with `no_new_privs` when
 *   `allowPrivilegeEscalation: false`) when the kubelet is root, and is refused with the reason
 *   (CreateContainerConfigError) when it is not. Such a pod's HOME and emptyDir volumes are in a
 *   folder it owns (group `fsGroup`), outside the kubelet's data folder; its working folder, Node
 *   binary and hostPath volumes must be open to it by their permission bits, or the container is
 *   refused (CreateContainerError) naming the path, where a runtime would start it to fail on EACCES.
 * - Each process is started through `setpriv --pdeathsig KILL` in its own process group, so it dies
 *   with the cluster, and deleting the pod stops the whole tree (SIGTERM, SIGKILL after the grace
 *   period).
 * - `terminationMessagePolicy: FallbackToLogsOnError` puts the log's tail (80 lines, 2 KiB) in
 *   `state.terminated.message` of a failed container.
 */
export class Kubelet {
  private readonly pods = new Map<string, PodState>();
  private readonly unsubscribe: () => void;
  private readonly sampleMs: number;
  private readonly backoffMs: number;
  private readonly logLimit: number;
  private readonly user: KubeletUser;
  private userPodsDir?: string;
  private readonly unpackedImages = new Map<LocalImage, { workingDir?: string; node?: string }>();

  constructor(private readonly o: KubeletOptions) {
    this.user = o.user ?? currentKubeletUser();
    this.sampleMs = o.memorySampleMs ?? 100;
    this.backoffMs = o.restartBackoffMs ?? 1000;
    this.logLimit = o.logLimitBytes ?? 4 * 1024 * 1024;
    this.unsubscribe = o.store.subscribe((event) => {
      if (event.resource !== "pods") return;
      const pod = event.object;
      if (event.type === "DELETED") {
        setImmediate(() => this.forget(String(pod.metadata.uid)));
        return;
      }
      if (!field(pod, "spec", "nodeName")) return;
      setImmediate(() => this.sync(pod));
    });
  }

  /** The log of a pod's container, the first when none is named (undefined when the kubelet never ran it). */
  logs(uid: string, container?: string): LogBuffer | undefined {
    const containers = this.pods.get(uid)?.containers ?? [];
    return container === undefined ? containers[0]?.logs : containers.find((c) => c.name === container)?.logs;
  }

  /**
   * The port of this machine a pod's `containerPort` listens on (no network namespace here: see
   * `startContainer`); undefined until one of its containers has started, or for a port it does not have.
   */
  hostPort(uid: string, containerPort: number): number | undefined {
    return this.pods.get(uid)?.hostPorts?.get(containerPort);
  }

  /** Kills every container at once (the cluster is stopping). */
  stop(): void {
    this.unsubscribe();
    for (const state of this.pods.values()) {
      state.removed = true;
      for (const c of state.containers) {
        clearTimeout(c.retry);
        this.kill(c, "SIGKILL");
        c.stopSupplement?.();
      }
    }
    // The folder of pods run as other users, when this kubelet made it.
    if (this.userPodsDir && !this.o.userPodsDir) this.remove(this.userPodsDir);
  }

  /**
   * A pod's own folder: under the kubelet's root for pods that run as the kubelet's user; for a
   * pod run as another user, a folder of the kubelet's (0711: the pod may search it, not list or
   * change it) outside the kubelet's 0700 data folder, under a parent it may search but not list
   * (0711). What the pod may write is in folders of its own below ({@link ownedDir}); its secret
   * volumes are in folders of the kubelet's ({@link secretVolume}), so no path the kubelet writes or
   * chowns through, as root, is one the pod could swap for a symlink.
   */
  private ensureUserPodsDir(): void {
    if (this.userPodsDir) return;
    this.userPodsDir = this.o.userPodsDir ?? mkdtempSync(path.join(tmpdir(), "blastplane-kubelet-"));
    mkdirSync(this.userPodsDir, { recursive: true });
    chmodSync(this.userPodsDir, 0o711);
  }

  private podDir(podUid: string, identity: ContainerIdentity): string {
    if (!identity.switched) {
      const dir = path.join(this.o.rootDir, "pods", podUid);
      mkdirSync(dir, { recursive: true });
      return dir;
    }
    this.ensureUserPodsDir();
    const dir = path.join(this.userPodsDir as string, podUid);
    mkdirSync(dir, { recursive: true });
    chmodSync(dir, 0o711);
    return dir;
  }

  /**
   * The image's files and the Node binary as a pod of another user reaches them: where the project
   * folder (or the binary's) is closed to that user, from one copy per image in the kubelet's
   * folder, open to all.
   */
  private unpacked(image: LocalImage, identity: ContainerIdentity): { workingDir?: string; node?: string } {
    const cached = this.unpackedImages.get(image);
    if (cached) return cached;
    const stageDir = () => {
      this.ensureUserPodsDir();
      const dir = path.join(this.userPodsDir as string, `image-${this.unpackedImages.size + 1}`);
      mkdirSync(dir, { recursive: true, mode: 0o755 });
      chmodSync(dir, 0o755);
      return dir;
    };
    const result: { workingDir?: string; node?: string } = {};
    let dir: string | undefined;
    if (image.files?.length && !permits(identity, image.workingDir, "rx")) {
      dir = stageDir();
      for (const entry of image.files) openCopy(path.join(image.workingDir, entry), path.join(dir, entry));
      // Folders made on the way (`dist` of `dist/jobapi`) got this process's umask (0700 under npm start).
      openFolders(dir);
      result.workingDir = dir;
    }
    if (!permits(identity, process.execPath, "x")) {
      dir ??= stageDir();
      result.node = path.join(dir, "node");
      openCopy(process.execPath, result.node);
    }
    this.unpackedImages.set(image, result);
    return result;
  }

  /**
   * A folder under the pod's folder, owned by the pod's user and volume group (setgid with
   * `fsGroup`). The folders on the way to it (`volumes` of `volumes/<name>`) stay the kubelet's
   * (0711 for a pod of another user): the pod cannot put a symlink in the place of the folder, which
   * would make the kubelet chown a folder of the host to it when the container starts again.
   */
  private ownedDir(podDir: string, identity: ContainerIdentity, ...parts: string[]): string {
    let dir = podDir;
    parts.forEach((part, i) => {
      if (!DNS_LABEL.test(part)) throw new Error(`invalid folder name ${JSON.stringify(part)} in the pod's folder`);
      dir = path.join(dir, part);
      if (!identity.switched) {
        mkdirSync(dir, { recursive: true });
        return;
      }
      try {
        mkdirSync(dir, { mode: 0o700 });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      }
      if (!lstatSync(dir).isDirectory()) throw new Error(`${dir} is not a folder`);
      if (i < parts.length - 1) {
        chmodSync(dir, 0o711);
        return;
      }
      chownSync(dir, identity.uid, identity.volumeGid);
      chmodSync(dir, identity.volumeGid === identity.gid ? 0o700 : 0o2770);
    });
    return dir;
  }

  private sync(pod: KubeObject): void {
    const uid = String(pod.metadata.uid);
    const current = this.o.store.get("pods", pod.metadata.namespace, pod.metadata.name);
    if (!current || current.metadata.uid !== uid) return;
    let state = this.pods.get(uid);
    if (current.metadata.deletionTimestamp) {
      if (state?.containers.some((c) => c.run)) this.terminate(state, current);
      else this.o.store.remove("pods", current.metadata.namespace, current.metadata.name);
      return;
    }
    const phase = String(field(current, "status", "phase") ?? "Pending");
    if (phase === "Succeeded" || phase === "Failed") return;
    if (!state) {
      const specs = field<Any[]>(current, "spec", "containers") ?? [];
      state = {
        uid,
        namespace: String(current.metadata.namespace),
        name: current.metadata.name,
        containers: specs.map((spec, index) => ({
          index,
          name: String(spec.name),
          logs: new LogBuffer(this.logLimit),
          restarts: 0,
        })),
        removed: false,
      };
      this.pods.set(uid, state);
      for (const c of state.containers) this.start(state, c);
    }
  }

  private forget(uid: string): void {
    const state = this.pods.get(uid);
    if (!state) return;
    state.removed = true;
    for (const c of state.containers) {
      clearTimeout(c.retry);
      this.kill(c, "SIGKILL");
      c.stopSupplement?.();
    }
    this.pods.delete(uid);
    this.remove(path.join(this.o.rootDir, "pods", uid));
    if (this.userPodsDir) this.remove(path.join(this.userPodsDir, uid));
  }

  /**
   * Removes a pod's folder (or the kubelet's) as root while a pod process that left its process
   * group may still change it: never through a symlink ({@link removeTree}).
   */
  private remove(dir: string): void {
    const problem = removeTree(dir);
    if (problem) this.o.logger.warn("kubelet folder not fully removed", { folder: dir, error: problem });
  }

  private podOf(state: PodState): KubeObject | undefined {
    if (state.removed) return undefined;
    const pod = this.o.store.get("pods", state.namespace, state.name);
    return pod && pod.metadata.uid === state.uid ? pod : undefined;
  }

  private setStatus(state: PodState, change: (status: Any, pod: KubeObject) => Any): KubeObject | undefined {
    const pod = this.podOf(state);
    if (!pod) return undefined;
    return this.o.store.update("pods", state.namespace, state.name, (p) => ({
      ...p,
      status: change({ ...((p.status as Any) ?? {}) }, p),
    }));
  }

  /**
   * Writes one container's status (`entry`, or its readiness alone) and what follows for the pod
   * from all of its containers' statuses: its phase (Pending until every container has started;
   * Succeeded or Failed once every one has terminated for good; Running between) and its Ready
   * and ContainersReady conditions (True only while every container is ready).
   */
  private setContainerStatus(state: PodState, c: ContainerState, entry: (previous: Any | undefined) => Any) {
    return this.setStatus(state, (status, p) => {
      const specs = field<Any[]>(p, "spec", "containers") ?? [];
      const previous = (status.containerStatuses as Any[] | undefined) ?? [];
      const statuses = specs.map((spec, i) => {
        const had = previous.find((s) => s.name === spec.name);
        if (i === c.index) return entry(had);
        return (
          had ?? {
            name: spec.name,
            image: spec.image,
            imageID: "",
            ready: false,
            started: false,
            restartCount: 0,
            state: { waiting: { reason: "ContainerCreating" } },
          }
        );
      });
      const terminated = (s: Any) => field(s, "state", "terminated") !== undefined;
      const phase = statuses.every(terminated)
        ? statuses.every((s) => field(s, "state", "terminated", "exitCode") === 0)
          ? "Succeeded"
          : "Failed"
        : statuses.every((s) => field(s, "state", "running") || field(s, "lastState", "terminated") || terminated(s))
          ? "Running"
          : "Pending";
      let conditions = field<Condition[]>(status, "conditions");
      if (phase === "Succeeded" || phase === "Failed") {
        conditions = ["Ready", "ContainersReady", "PodReadyToStartContainers"].reduce(
          (cs, type) =>
            setCondition(cs, {
              type,
              status: "False",
              ...(type === "PodReadyToStartContainers" ? {} : { reason: "PodCompleted" }),
            }),
          conditions,
        );
      } else {
        const ready = statuses.every((s) => s.ready === true);
        const started = statuses.some((s) => field(s, "state", "running") || field(s, "lastState", "terminated"));
        conditions = READY_CONDITIONS.reduce((cs, type) => {
          if (type === "Ready" || type === "ContainersReady")
            return setCondition(
              cs,
              ready ? { type, status: "True" } : { type, status: "False", reason: "ContainersNotReady" },
            );
          return started ? setCondition(cs, { type, status: "True" }) : cs;
        }, conditions);
      }
      return { ...status, phase, conditions, containerStatuses: statuses };
    });
  }

  private waiting(
    state: PodState,
    c: ContainerState,
    container: Any,
    reason: string,
    message: string,
    retry: boolean,
  ): void {
    const pod = this.setContainerStatus(state, c, (previous) => ({
      name: container.name,
      image: container.image,
      imageID: "",
      ready: false,
      started: false,
      restartCount: c.restarts,
      state: { waiting: { reason, message } },
      ...(previous?.lastState ? { lastState: previous.lastState } : {}),
    }));
    if (pod)
      recordEvent(
        this.o.store,
        pod,
        "Warning",
        reason === "ImagePullBackOff" ? "BackOff" : "Failed",
        message,
        "kubelet",
      );
    if (retry) {
      clearTimeout(c.retry);
      c.retry = setTimeout(() => this.start(state, c), Math.max(this.backoffMs, 1000));
      c.retry.unref();
    }
  }

  /**
   * Starts one container of the pod. Called from timers and promise callbacks: whatever fails in it
   * leaves the container waiting (CreateContainerError, retried), never an exception that would end
   * the process the kubelet runs in.
   */
  private start(state: PodState, c: ContainerState): void {
    // A container runs once at a time (a retry pending from before it started does not start it again).
    if (c.run) return;
    try {
      this.startContainer(state, c);
    } catch (error) {
      const container = (field<Any[]>(this.podOf(state), "spec", "containers") ?? [])[c.index] ?? {};
      try {
        this.waiting(state, c, container, "CreateContainerError", (error as Error).message, true);
      } catch (again) {
        this.o.logger.warn("container could not start", {
          pod: state.name,
          container: c.name,
          error: (again as Error).message,
        });
      }
    }
  }

  /**
   * The ports the pod listens on: every container's `containerPort`s and the value of each listen
   * variable ({@link listenEnvKind} `port`) a container names without declaring it as a port (the
   * terminal daemon's `JOBAPI_TERMINAL_DAEMON_PORT`, reached over the pod's loopback only).
   */
  private podPorts(containers: Any[]): number[] {
    const ports = new Set<number>();
    for (const container of containers) {
      for (const p of (container.ports as Any[]) ?? [])
        if (Number.isInteger(Number(p.containerPort))) ports.add(Number(p.containerPort));
      for (const e of (container.env as Any[]) ?? []) {
        if (listenEnvKind(String(e.name)) === "port" && typeof e.value === "string" && /^\d+$/.test(e.value))
          ports.add(Number(e.value));
      }
    }
    return [...ports];
  }

  /**
   * A `secret` volume: the Secret's keys as files (mode `defaultMode`, 0644 by default, owned by the
   * pod's user and volume group) in a fresh folder of the kubelet's in the pod's folder (0750, group
   * the pod's volume group: the pod reads it, cannot change it), made anew at each start of the
   * container, the previous one removed. Files are created exclusively and changed through their
   * descriptor: nothing the kubelet writes follows a symlink.
   */
  private secretVolume(
    c: ContainerState,
    state: PodState,
    podDir: string,
    identity: ContainerIdentity,
    volume: Any,
  ): string | Error {
    const ref = field<Any>(volume, "secret") ?? {};
    const secret = this.o.store.get("secrets", state.namespace, String(ref.secretName));
    if (!secret && ref.optional !== true)
      return new Error(
        `MountVolume.SetUp failed for volume "${String(volume.name)}" : secret "${String(ref.secretName)}" not found`,
      );
    const dir = this.kubeletDir(c, podDir, identity, `secret-${String(volume.name)}-`);
    const mode = Number.isInteger(ref.defaultMode) ? Number(ref.defaultMode) & 0o777 : 0o644;
    for (const [key, value] of Object.entries(
      (field<Record<string, string>>(secret, "data") ?? {}) as Record<string, string>,
    )) {
      if (!/^[\w.-]+$/.test(key) || key === "." || key === "..") continue;
      writeNewFile(
        path.join(dir, key),
        Buffer.from(String(value), "base64"),
        mode,
        identity.switched ? { uid: identity.uid, gid: identity.volumeGid } : undefined,
      );
    }
    return dir;
  }

  /**
   * A fresh folder of the kubelet's in the pod's folder for one start of the container (0750,
   * group the pod's volume group: the pod reads it, cannot change it; its parents are the
   * kubelet's too), removed when the container starts again.
   */
  private kubeletDir(c: ContainerState, podDir: string, identity: ContainerIdentity, prefix: string): string {
    const dir = mkdtempSync(path.join(podDir, prefix));
    c.kubeletDirs = [...(c.kubeletDirs ?? []), dir];
    chmodSync(dir, 0o750);
    if (identity.switched) chownSync(dir, -1, identity.volumeGid);
    return dir;
  }

  private startContainer(state: PodState, c: ContainerState): void {
    const pod = this.podOf(state);
    if (!pod || pod.metadata.deletionTimestamp) return;
    const spec = (pod.spec as Any) ?? {};
    const containers = (spec.containers as Any[]) ?? [];
    const container = containers[c.index] as Any;
    if (!container || container.name !== c.name) return;
    const imageRef = String(container.image);
    const image = this.o.images.find((i) => i.pattern.test(imageRef));
    if (!image) {
      const pulled = field(
        ((field<Any[]>(pod, "status", "containerStatuses") ?? []) as Any[]).find((s) => s.name === c.name),
        "state",
        "waiting",
        "reason",
      );
      const reason = pulled === "ErrImagePull" || pulled === "ImagePullBackOff" ? "ImagePullBackOff" : "ErrImagePull";
      const message =
        reason === "ErrImagePull"
          ? `Failed to pull image "${imageRef}": the local kubelet runs only images it maps to this machine's build`
          : `Back-off pulling image "${imageRef}"`;
      this.waiting(state, c, container, reason, message, true);
      return;
    }
    const where = `(pod: "${state.name}_${state.namespace}(${state.uid})", container: ${String(container.name)})`;
    const identity = containerIdentity(pod, container, this.user, where);
    if (isRefusal(identity)) {
      this.waiting(state, c, container, identity.reason, identity.message, false);
      return;
    }
    // No network namespace: every port the pod listens on gets a free port of this machine, kept
    // for the pod's life and shared by its containers (the first container to start finds them).
    if (!state.hostPorts) {
      const ports = this.podPorts(containers);
      if (ports.length > 0) {
        if (state.portsPending) {
          c.retry = setTimeout(() => this.start(state, c), 50);
          c.retry.unref();
          return;
        }
        state.portsPending = true;
        freeLoopbackPorts(ports.length).then(
          (free) => {
            state.hostPorts = new Map(ports.map((p, i) => [p, free[i] as number]));
            state.portsPending = false;
            this.start(state, c);
          },
          (error: Error) => {
            state.portsPending = false;
            this.waiting(state, c, container, "CreateContainerError", `no free port: ${error.message}`, true);
          },
        );
        return;
      }
      state.hostPorts = new Map();
    }
    const podDir = this.podDir(state.uid, identity);
    // What the kubelet made for its previous start is not in use (the container is not running).
    c.stopSupplement?.();
    c.stopSupplement = undefined;
    for (const dir of c.kubeletDirs ?? []) this.remove(dir);
    c.kubeletDirs = [];
    // Volumes: where each mount path lives on this machine.
    const mounts: [string, string][] = [];
    for (const m of (container.volumeMounts as Any[]) ?? []) {
      const volume = ((spec.volumes as Any[]) ?? []).find((v) => v.name === m.name);
      // The API refuses other names; a name is part of a path on this machine, so checked again here.
      if (volume && (typeof volume.name !== "string" || !DNS_LABEL.test(volume.name))) {
        this.waiting(
          state,
          c,
          container,
          "CreateContainerConfigError",
          `invalid volume name ${JSON.stringify(volume.name)}: must be a DNS label`,
          false,
        );
        return;
      }
      let host: string | undefined;
      if (volume?.hostPath) host = String(field(volume, "hostPath", "path"));
      else if (volume?.emptyDir) host = this.ownedDir(podDir, identity, "volumes", String(m.name));
      else if (volume?.secret) {
        const made = this.secretVolume(c, state, podDir, identity, volume);
        if (made instanceof Error) {
          this.waiting(state, c, container, "CreateContainerConfigError", made.message, true);
          return;
        }
        host = made;
      }
      if (!host) {
        this.waiting(
          state,
          c,
          container,
          "CreateContainerConfigError",
          `volume "${String(m.name)}" is not a hostPath, emptyDir or secret volume`,
          false,
        );
        return;
      }
      // A secret volume is read-only, as Kubernetes mounts it.
      const readOnly = m.readOnly === true || Boolean(volume?.secret);
      if (identity.switched && !permits(identity, host, readOnly ? "rx" : "rwx")) {
        this.waiting(
          state,
          c,
          container,
          "CreateContainerError",
          `volume "${String(m.name)}": ${host} is not ${readOnly ? "readable" : "writable"} by uid ${identity.uid} gid ${identity.gid} ${where}`,
          false,
        );
        return;
      }
      mounts.push([String(m.mountPath).replace(/\/+$/, ""), host]);
    }
    mounts.sort((a, b) => b[0].length - a[0].length);
    const mapPath = (value: string): string => {
      for (const [mountPath, host] of mounts) {
        if (value === mountPath || value.startsWith(`${mountPath}/`)) return host + value.slice(mountPath.length);
      }
      return value;
    };
    // The pod's address is this machine's loopback, its ports the ones given above: a variable that
    // names what the process listens on (its port, its bind address) is rewritten to what it is here.
    const mapEnv = (name: string, value: string): string => {
      const kind = listenEnvKind(name);
      const hostPort = kind === "port" && /^\d+$/.test(value) ? state.hostPorts?.get(Number(value)) : undefined;
      if (hostPort !== undefined) return String(hostPort);
      if (kind === "host" && value === "0.0.0.0") return "127.0.0.1";
      return mapPath(value);
    };
    const home = this.ownedDir(podDir, identity, "home");
    let env: Record<string, string> = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: home,
      HOSTNAME: state.name,
      NODE_ENV: "production",
    };
    for (const e of (container.env as Any[]) ?? []) {
      const name = String(e.name);
      if (typeof e.value === "string") env[name] = mapEnv(name, e.value);
      else if (field(e, "valueFrom", "secretKeyRef")) {
        const ref = field<Any>(e, "valueFrom", "secretKeyRef") ?? {};
        const secret = this.o.store.get("secrets", state.namespace, String(ref.name));
        const data = field<string>(secret, "data", String(ref.key));
        if (data === undefined) {
          if (ref.optional === true) continue;
          this.waiting(
            state,
            c,
            container,
            "CreateContainerConfigError",
            secret
              ? `couldn't find key ${String(ref.key)} in Secret ${state.namespace}/${String(ref.name)}`
              : `secret "${String(ref.name)}" not found`,
            true,
          );
          return;
        }
        env[name] = Buffer.from(data, "base64").toString("utf8");
      } else if (field(e, "valueFrom", "fieldRef")) {
        const fieldPath = String(field(e, "valueFrom", "fieldRef", "fieldPath"));
        const values: Record<string, unknown> = {
          "metadata.name": pod.metadata.name,
          "metadata.namespace": pod.metadata.namespace,
          "metadata.uid": pod.metadata.uid,
          "spec.nodeName": spec.nodeName,
          "spec.serviceAccountName": spec.serviceAccountName ?? "default",
          "status.podIP": "127.0.0.1",
          "status.hostIP": "127.0.0.1",
        };
        env[name] = String(values[fieldPath] ?? "");
      }
    }
    let supplied: ReturnType<ContainerSupplement>;
    let nodeDir: string | undefined;
    try {
      supplied = this.o.supplement?.({
        pod,
        container,
        env,
        // The kubelet's, not the container's: it writes there as root, so the container may not
        // put a symlink in the place of a file or folder it writes (a host file written or chowned).
        dir: () => {
          nodeDir ??= this.kubeletDir(c, podDir, identity, "node-");
          return nodeDir;
        },
        owner: identity.switched ? { uid: identity.uid, gid: identity.volumeGid } : undefined,
      });
    } catch (error) {
      // What the node supplies could not be made (a chown refused, a file not readable): as a
      // kubelet whose container config cannot be generated, the container waits and is retried.
      this.waiting(state, c, container, "CreateContainerConfigError", (error as Error).message, true);
      return;
    }
    if (supplied) {
      env = supplied.env;
      c.stopSupplement = supplied.stop;
    }
    const argv = [...((container.command as string[]) ?? image.cmd), ...((container.args as string[]) ?? [])].map(
      mapPath,
    );
    if (argv[0] !== "node") {
      this.waiting(
        state,
        c,
        container,
        "CreateContainerError",
        `exec: "${argv[0] ?? ""}": executable file not found in $PATH`,
        false,
      );
      return;
    }
    const unpacked = identity.switched ? this.unpacked(image, identity) : undefined;
    const imageDir = unpacked?.workingDir ?? image.workingDir;
    const node = unpacked?.node ?? process.execPath;
    const cwd = container.workingDir ? mapPath(String(container.workingDir)) : imageDir;
    if (identity.switched) {
      for (const [what, file, mode] of [
        ["working folder", cwd, "rx"],
        ["Node binary", node, "x"],
      ] as const) {
        if (permits(identity, file, mode)) continue;
        this.waiting(
          state,
          c,
          container,
          "CreateContainerError",
          `the ${what} ${file} is not open to uid ${identity.uid} gid ${identity.gid} ${where}`,
          false,
        );
        return;
      }
    }
    const [command, args] = SETPRIV
      ? [SETPRIV, [...setprivUser(identity), "--pdeathsig", "KILL", "--", node, ...argv.slice(1)]]
      : [node, argv.slice(1)];
    const child = spawn(command, args, {
      cwd,
      env,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      // Without setpriv the runtime switches the user itself (and the process keeps no supplementary group).
      ...(identity.switched && !SETPRIV ? { uid: identity.uid, gid: identity.gid } : {}),
    });
    child.stdout?.on("data", (chunk: Buffer) => c.logs.push(chunk));
    child.stderr?.on("data", (chunk: Buffer) => c.logs.push(chunk));
    const limit = parseQuantity(field<string>(container, "resources", "limits", "memory"));
    const probe = field<Any>(container, "readinessProbe");
    const run: Run = { child, oom: false, ready: !probe, startedAt: timestamp() };
    if (limit !== undefined && child.pid !== undefined) {
      const pid = child.pid;
      run.sampler = setInterval(() => {
        if (run.oom || treeRssBytes(pid) <= limit) return;
        run.oom = true;
        this.o.logger.info("container exceeded its memory limit", {
          pod: state.name,
          container: c.name,
          limit_bytes: limit,
        });
        this.kill(c, "SIGKILL");
      }, this.sampleMs);
      run.sampler.unref();
    }
    c.run = run;
    child.once("error", (error) => c.logs.push(Buffer.from(`${error.message}\n`)));
    child.once("close", (code, signal) => this.exited(state, c, run, code, signal));
    this.setStatus(state, (status) => ({
      ...status,
      hostIP: "127.0.0.1",
      hostIPs: [{ ip: "127.0.0.1" }],
      podIP: "127.0.0.1",
      podIPs: [{ ip: "127.0.0.1" }],
      startTime: status.startTime ?? run.startedAt,
    }));
    const started = this.setContainerStatus(state, c, (previous) => ({
      name: container.name,
      image: imageRef,
      imageID: `local://${imageRef}`,
      containerID: `local://${child.pid ?? 0}`,
      ready: run.ready,
      started: true,
      restartCount: c.restarts,
      state: { running: { startedAt: run.startedAt } },
      ...(previous?.lastState ? { lastState: previous.lastState } : {}),
    }));
    if (started && c.restarts === 0) {
      recordEvent(
        this.o.store,
        started,
        "Normal",
        "Pulled",
        `Container image "${imageRef}" already present on machine`,
        "kubelet",
      );
      recordEvent(
        this.o.store,
        started,
        "Normal",
        "Created",
        `Created container: ${String(container.name)}`,
        "kubelet",
      );
      recordEvent(this.o.store, started, "Normal", "Started", `Started container ${String(container.name)}`, "kubelet");
    }
    if (probe) this.probeReadiness(state, c, run, container, probe);
  }

  /**
   * The container's readiness probe (`httpGet` on one of its ports; other kinds count as passing):
   * the first after `initialDelaySeconds`, then one every `periodSeconds` once the container has
   * been ready — until then every second, so a container counts as ready about when it is rather
   * than up to a period later (a real kubelet waits the period). `failureThreshold` failures in a
   * row make a ready container unready; one success makes it ready. The pod's Ready condition and
   * the container's `ready` follow (the Deployment's available replicas follow those).
   */
  private probeReadiness(state: PodState, c: ContainerState, run: Run, container: Any, probe: Any): void {
    const get = field<Any>(probe, "httpGet");
    const named = ((container.ports as Any[]) ?? []).find((p) => p.name === get?.port);
    const hostPort = state.hostPorts?.get(Number(named ? named.containerPort : get?.port));
    if (!get || hostPort === undefined) {
      this.setReady(state, c, run, true);
      return;
    }
    const url = `http://127.0.0.1:${hostPort}${probePath(get.path)}`;
    const periodMs = Number(probe.periodSeconds ?? 10) * 1000;
    const timeoutMs = Number(probe.timeoutSeconds ?? 1) * 1000;
    const failureThreshold = Number(probe.failureThreshold ?? 3);
    let failures = 0;
    let everReady = false;
    let lastFailure: string | undefined;
    // Never rejects: a probe that cannot even be sent is a failed probe (an Unhealthy event), and
    // the loop goes on; nothing a pod spec says may end the process the kubelet runs in.
    const tick = async () => {
      let failed: string | undefined;
      try {
        failed = await httpProbe(url, timeoutMs);
      } catch (error) {
        failed = `Get "${url}": ${(error as Error).message}`;
      }
      if (c.run !== run) return;
      try {
        const ok = failed === undefined;
        failures = ok ? 0 : failures + 1;
        if (ok && !run.ready) this.setReady(state, c, run, true);
        else if (!ok && run.ready && failures >= failureThreshold) this.setReady(state, c, run, false);
        // One event per distinct failure (a kubelet counts repeats of an event rather than adding more).
        const pod = failed !== undefined && failed !== lastFailure ? this.podOf(state) : undefined;
        if (pod) recordEvent(this.o.store, pod, "Warning", "Unhealthy", `Readiness probe failed: ${failed}`, "kubelet");
        lastFailure = failed;
        everReady ||= ok;
      } catch (error) {
        this.o.logger.warn("readiness probe bookkeeping failed", { pod: state.name, error: (error as Error).message });
      }
      run.probeTimer = setTimeout(probeTick, everReady ? periodMs : Math.min(periodMs, FIRST_READY_PROBE_MS));
      run.probeTimer.unref();
    };
    const probeTick = () => void tick().catch(() => undefined);
    run.probeTimer = setTimeout(probeTick, Number(probe.initialDelaySeconds ?? 0) * 1000);
    run.probeTimer.unref();
  }

  private setReady(state: PodState, c: ContainerState, run: Run, ready: boolean): void {
    if (c.run !== run) return;
    run.ready = ready;
    const pod = this.setContainerStatus(state, c, (previous) => ({ ...(previous ?? { name: c.name }), ready }));
    if (pod) this.o.logger.debug("container readiness changed", { pod: state.name, container: c.name, ready });
  }

  private exited(
    state: PodState,
    c: ContainerState,
    run: Run,
    code: number | null,
    signal: NodeJS.Signals | null,
  ): void {
    clearInterval(run.sampler);
    clearTimeout(run.killTimer);
    clearTimeout(run.probeTimer);
    if (c.run === run) {
      c.run = undefined;
      c.stopSupplement?.();
      c.stopSupplement = undefined;
    }
    const pod = this.podOf(state);
    if (!pod) return;
    if (pod.metadata.deletionTimestamp) {
      c.logs.end();
      // The pod goes once the last of its containers has stopped.
      if (!state.containers.some((other) => other.run)) this.o.store.remove("pods", state.namespace, state.name);
      return;
    }
    const spec = (pod.spec as Any) ?? {};
    const container = ((spec.containers as Any[]) ?? [])[c.index] ?? {};
    const exitCode = run.oom ? 137 : (code ?? 128 + (signal ? (osConstants.signals[signal] ?? 9) : 9));
    const reason = run.oom ? "OOMKilled" : exitCode === 0 ? "Completed" : "Error";
    let message: string | undefined;
    if (exitCode !== 0 && container.terminationMessagePolicy === "FallbackToLogsOnError") {
      message = c.logs.text().split("\n").slice(-81).join("\n").slice(-2048);
    }
    const terminated = {
      exitCode,
      reason,
      startedAt: run.startedAt,
      finishedAt: timestamp(),
      containerID: `local://${run.child.pid ?? 0}`,
      ...(message ? { message } : {}),
    };
    // The pod's restart policy applies to each container on its own.
    const policy = String(spec.restartPolicy ?? "Always");
    const restart = policy === "Always" || (policy === "OnFailure" && exitCode !== 0);
    if (restart) {
      c.restarts++;
      this.setContainerStatus(state, c, () => ({
        name: container.name,
        image: container.image,
        imageID: `local://${String(container.image)}`,
        ready: false,
        started: false,
        restartCount: c.restarts,
        lastState: { terminated },
        state: {
          waiting: {
            reason: exitCode === 0 ? "Completed" : "CrashLoopBackOff",
            message: `back-off restarting failed container ${String(container.name)}`,
          },
        },
      }));
      c.retry = setTimeout(() => this.start(state, c), this.backoffMs);
      c.retry.unref();
      return;
    }
    c.logs.end();
    this.setContainerStatus(state, c, () => ({
      name: container.name,
      image: container.image,
      imageID: `local://${String(container.image)}`,
      containerID: terminated.containerID,
      ready: false,
      started: false,
      restartCount: c.restarts,
      state: { terminated },
    }));
  }

  /** Graceful stop of a pod being deleted: each running container SIGTERM now, SIGKILL when the grace period ends. */
  private terminate(state: PodState, pod: KubeObject): void {
    const grace = Number(pod.metadata.deletionGracePeriodSeconds ?? 30);
    for (const c of state.containers) {
      // A container waiting to restart does not.
      clearTimeout(c.retry);
      const run = c.run;
      if (!run || run.killTimer) continue;
      recordEvent(this.o.store, pod, "Normal", "Killing", `Stopping container ${c.name}`, "kubelet");
      this.kill(c, "SIGTERM");
      run.killTimer = setTimeout(() => this.kill(c, "SIGKILL"), grace * 1000);
      run.killTimer.unref();
    }
  }

  private kill(c: ContainerState, signal: NodeJS.Signals): void {
    const pid = c.run?.child.pid;
    if (pid === undefined) return;
    try {
      // The whole process group: the container's process and everything it started.
      process.kill(-pid, signal);
    } catch {
      // Already gone.
    }
  }
}

/** Copies a file or folder so that every user may read it (and run what was executable). */
function openCopy(from: string, to: string): void {
  const st = statSync(from);
  if (st.isDirectory()) {
    mkdirSync(to, { recursive: true, mode: 0o755 });
    chmodSync(to, 0o755);
    for (const name of readdirSync(from)) openCopy(path.join(from, name), path.join(to, name));
    return;
  }
  mkdirSync(path.dirname(to), { recursive: true, mode: 0o755 });
  // A file already open to others is linked (no copy of the Node binary); a link shares its mode.
  if (st.mode & 0o004 && (!(st.mode & 0o100) || st.mode & 0o001)) {
    try {
      linkSync(from, to);
      return;
    } catch {
      // another file system, or links refused: copy
    }
  }
  copyFileSync(from, to);
  chmodSync(to, st.mode & 0o100 ? 0o755 : 0o644);
}

/** Opens every folder under `dir` (and `dir`) to all users for reading and search. */
function openFolders(dir: string): void {
  chmodSync(dir, 0o755);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) openFolders(path.join(dir, entry.name));
  }
}

/**
 * Writes a new file (`wx` and `O_NOFOLLOW`: refused when anything, a symlink too, is already at
 * `file`), its mode and owner set through its descriptor. For what the kubelet, as root, writes
 * for a pod: nothing it writes follows a path the pod could have changed.
 */
export function writeNewFile(
  file: string,
  data: string | Buffer,
  mode: number,
  owner: { uid: number; gid: number } | undefined,
): void {
  const fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  try {
    const bytes = typeof data === "string" ? Buffer.from(data) : data;
    for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at, bytes.length - at);
    fchmodSync(fd, mode);
    if (owner) fchownSync(fd, owner.uid, owner.gid);
  } finally {
    closeSync(fd);
  }
}
