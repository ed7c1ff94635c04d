/**
 * The local kubelet's users (issue 21 item 8): which uid, gid and groups a container runs as from
 * its securityContext, and when the kubelet refuses it with the reason instead.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { buildShardJob, POD_USER } from "../../jobapi/executors/kubernetes-manifests.js";
import type { Any } from "../../local/kube/objects.js";
import { containerIdentity, isRefusal, passwdGroupOf, permits } from "../../local/kube/run-as.js";
import type { KubeObject } from "../../local/kube/selectors.js";

const WHERE = '(pod: "p_ns(uid)", container: main)';
const ROOT_KUBELET = { uid: 0, gid: 0, passwdGroupOf: (uid: number) => (uid === 1000 ? 1000 : undefined) };
const USER_KUBELET = { uid: 1001, gid: 1001 };

function pod(podContext: Any, containerContext: Any = {}): [KubeObject, Any] {
  const container = { name: "main", image: "node:22", securityContext: containerContext };
  return [
    {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p" },
      spec: { securityContext: podContext, containers: [container] },
    },
    container,
  ];
}

const identity = (kubelet: typeof USER_KUBELET, podContext: Any, containerContext: Any = {}) =>
  containerIdentity(...pod(podContext, containerContext), kubelet, WHERE);

describe("the local kubelet's container users", () => {
  it("a root kubelet runs a container as the securityContext's uid, gid and fsGroup (the container's fields over the pod's)", () => {
    expect(identity(ROOT_KUBELET, { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 2000 })).toEqual({
      uid: 1000,
      gid: 1000,
      groups: [2000],
      volumeGid: 2000,
      switched: true,
      noNewPrivileges: false,
    });
    expect(
      identity(
        ROOT_KUBELET,
        { runAsUser: 1000, runAsGroup: 1000, supplementalGroups: [3000, 3000] },
        { runAsUser: 1500, runAsGroup: 1600, allowPrivilegeEscalation: false },
      ),
    ).toEqual({ uid: 1500, gid: 1600, groups: [3000], volumeGid: 1600, switched: true, noNewPrivileges: true });
    // Without runAsGroup: the uid's group in the image's passwd, else 0 (as a runtime does).
    expect(identity(ROOT_KUBELET, { runAsUser: 1000 })).toMatchObject({ uid: 1000, gid: 1000 });
    expect(identity(ROOT_KUBELET, { runAsUser: 4242 })).toMatchObject({ uid: 4242, gid: 0 });
    // Nothing asked: the image's user, locally the kubelet's own, unswitched.
    expect(identity(ROOT_KUBELET, {})).toMatchObject({ uid: 0, gid: 0, switched: false });
  });

  it("the shard Job's pod, as the Kubernetes executor builds it, runs as POD_USER", () => {
    const job = buildShardJob(
      {
        jobId: "job_1",
        shardId: "b0-p1",
        program: "blastn",
        args: ["-query", "/q", "-out", "/o"],
        outputPath: "/o",
        cwd: "/",
        attempt: 1,
        batch: 0,
        queryPath: "/q",
        database: { name: "demo", version: "2026-01-01-00-00-00" },
      },
      {
        namespace: "blastplane",
        image: "blastplane-jobapi:local",
        nodeSelector: {},
        tolerations: [],
        backoffLimit: 1,
        activeDeadlineSeconds: 60,
        ttlSecondsAfterFinished: 60,
        workingSetBytes: 0,
        dbCacheHostPath: "/mnt/blastdb",
      },
    );
    const spec = job.spec?.template.spec as unknown as Any;
    const shardPod = { apiVersion: "v1", kind: "Pod", metadata: { name: "shard" }, spec } as KubeObject;
    const container = (spec.containers as Any[])[0] as Any;
    expect(containerIdentity(shardPod, container, ROOT_KUBELET, WHERE)).toMatchObject({
      uid: POD_USER.uid,
      gid: POD_USER.gid,
      groups: [POD_USER.gid],
      switched: true,
      noNewPrivileges: true,
    });
  });

  it("refuses a container runAsNonRoot would run as root, with Kubernetes' messages", () => {
    expect(identity(ROOT_KUBELET, { runAsNonRoot: true, runAsUser: 0 })).toEqual({
      reason: "CreateContainerConfigError",
      message: `container's runAsUser breaks non-root policy ${WHERE}`,
    });
    expect(identity(ROOT_KUBELET, {}, { runAsNonRoot: true })).toEqual({
      reason: "CreateContainerConfigError",
      message: `container has runAsNonRoot and image will run as root ${WHERE}`,
    });
    // The container may lift the pod's runAsNonRoot (Kubernetes' precedence).
    expect(isRefusal(identity(ROOT_KUBELET, { runAsNonRoot: true }, { runAsNonRoot: false }))).toBe(false);
    // A non-root kubelet's image user is not root.
    expect(identity(USER_KUBELET, { runAsNonRoot: true })).toMatchObject({ uid: 1001, switched: false });
  });

  it("a kubelet that is not root refuses another uid or gid with the reason, and runs its own", () => {
    expect(identity(USER_KUBELET, { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000 })).toEqual({
      reason: "CreateContainerConfigError",
      message: `the local kubelet runs as uid 1001 gid 1001 and cannot start a container as uid 1000 gid 1000: only a kubelet running as root switches users ${WHERE}`,
    });
    expect(identity(USER_KUBELET, { runAsUser: 1001, runAsGroup: 7 })).toMatchObject({
      reason: "CreateContainerConfigError",
    });
    expect(identity(USER_KUBELET, { runAsUser: 1001, runAsGroup: 1001, fsGroup: 1001 })).toEqual({
      uid: 1001,
      gid: 1001,
      groups: [],
      volumeGid: 1001,
      switched: false,
      noNewPrivileges: false,
    });
  });

  it("refuses ids that are not ids", () => {
    for (const bad of [{ runAsUser: -1 }, { runAsUser: "1000" }, { runAsGroup: 1.5 }, { fsGroup: 2 ** 33 }]) {
      expect(identity(ROOT_KUBELET, bad), JSON.stringify(bad)).toMatchObject({ reason: "CreateContainerConfigError" });
    }
    expect(identity(ROOT_KUBELET, { supplementalGroups: [1, "x"] })).toMatchObject({
      reason: "CreateContainerConfigError",
    });
  });

  describe("what a user may reach, by permission bits", () => {
    const work = mkdtempSync(path.join(tmpdir(), "bp-run-as-"));
    afterAll(() => rmSync(work, { recursive: true, force: true }));
    const user = { uid: 4242, gid: 4242, groups: [] as number[] };

    it("needs search on every folder above and the mode on the target", () => {
      const open = path.join(work, "open");
      mkdirSync(open);
      chmodSync(work, 0o711);
      chmodSync(open, 0o755);
      expect(permits(user, open, "rx")).toBe(true);
      expect(permits(user, open, "rwx")).toBe(false);
      chmodSync(work, 0o700);
      expect(permits(user, open, "rx")).toBe(false);
      chmodSync(work, 0o711);
      const file = path.join(open, "f");
      writeFileSync(file, "x");
      chmodSync(file, 0o750);
      expect(permits(user, file, "x")).toBe(false);
      // The group's bits count for a supplementary group too (files here belong to this process's gid).
      expect(permits({ ...user, groups: [process.getgid?.() ?? 0] }, file, "x")).toBe(true);
      expect(permits(user, path.join(work, "missing"), "rx")).toBe(false);
    });

    it("reads the primary group from a passwd file", () => {
      const passwd = path.join(work, "passwd");
      writeFileSync(passwd, "root:x:0:0:root:/root:/bin/bash\nnode:x:1000:1000::/home/node:/bin/sh\n");
      expect(passwdGroupOf(1000, passwd)).toBe(1000);
      expect(passwdGroupOf(1001, passwd)).toBeUndefined();
      expect(passwdGroupOf(1000, path.join(work, "none"))).toBeUndefined();
    });
  });
});
