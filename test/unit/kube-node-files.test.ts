/**
 * The local kubelet's root file work on folders a pod process may still change (issue 28): a
 * process that left its process group (`setsid`) survives the pod's kill and can swap a folder for
 * a symlink to a host folder while root removes or chowns the tree. Removal and ownership must
 * never follow a symlink out of the tree, even one swapped in mid-walk.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import {
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { prepareNodeFolder } from "../../local/kube/cluster.js";
import { giveTree, removeTree } from "../../local/kube/node-files.js";

const work = mkdtempSync(path.join(tmpdir(), "kube-node-files-"));
afterAll(() => rmSync(work, { recursive: true, force: true }), 180_000);

const isRoot = process.getuid?.() === 0;
/** Whom the tree is given to: a pod's user when root can, else this process's own user. */
const OWNER = isRoot ? { uid: 1000, gid: 1000 } : { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };

let case_ = 0;
function fresh(): { pod: string; host: string } {
  case_ += 1;
  const pod = path.join(work, `pod-${case_}`);
  const host = path.join(work, `host-${case_}`);
  mkdirSync(pod);
  mkdirSync(host);
  return { pod, host };
}

function fill(dir: string, count: number, content: string): void {
  mkdirSync(dir, { recursive: true });
  for (let i = 0; i < count; i++) writeFileSync(path.join(dir, `f${i}`), content);
}

/**
 * A process standing in for a pod's surviving one: once `watch` changes (`mtime`: an entry of the
 * folder removed), it moves each named folder aside and puts a
 * symlink to `host` in its place (`ctime`: the folder's owner set). It prints `ready` before watching and `swapped <n>` or `late`.
 */
function racer(watch: string, by: "mtime" | "ctime", folders: string[], host: string): ChildProcess {
  const script = `
    const fs = require("node:fs");
    const [watch, by, host, ...folders] = process.argv.slice(1);
    const seen = () => { const s = fs.lstatSync(watch, { bigint: true }); return by === "ctime" ? s.ctimeNs : s.mtimeNs; };
    const before = seen();
    process.stdout.write("ready\\n");
    let now = before;
    try { while ((now = seen()) === before); } catch { process.stdout.write("late\\n"); process.exit(0); }
    let n = 0;
    for (const f of folders) {
      try { fs.renameSync(f, f + ".aside"); fs.symlinkSync(host, f); n++; } catch {}
    }
    process.stdout.write(n > 0 ? "swapped " + n + "\\n" : "late\\n");
  `;
  return spawn(process.execPath, ["-e", script, watch, by, host, ...folders], { stdio: ["ignore", "pipe", "inherit"] });
}

async function lines(child: ChildProcess): Promise<{ next: () => Promise<string>; done: Promise<unknown> }> {
  const queue: string[] = [];
  const waiters: ((line: string) => void)[] = [];
  let buffered = "";
  child.stdout?.setEncoding("utf8");
  child.stdout?.on("data", (chunk: string) => {
    buffered += chunk;
    let at = buffered.indexOf("\n");
    while (at >= 0) {
      const line = buffered.slice(0, at);
      buffered = buffered.slice(at + 1);
      const waiter = waiters.shift();
      if (waiter) waiter(line);
      else queue.push(line);
      at = buffered.indexOf("\n");
    }
  });
  const done = once(child, "exit");
  return {
    next: () => {
      const line = queue.shift();
      return line !== undefined ? Promise.resolve(line) : new Promise((resolve) => waiters.push(resolve));
    },
    done,
  };
}

describe("the local kubelet's root removal and ownership never follow a pod's symlinks", () => {
  it("removing a pod's folder unlinks a symlink to a host folder planted in it, leaving the host folder whole", () => {
    const { pod, host } = fresh();
    fill(host, 3, "host");
    fill(path.join(pod, "volumes", "cache"), 3, "pod");
    symlinkSync(host, path.join(pod, "volumes", "host-link"));
    symlinkSync(path.join(host, "f0"), path.join(pod, "volumes", "cache", "file-link"));

    expect(removeTree(pod)).toBeUndefined();

    expect(existsSync(pod)).toBe(false);
    expect(readdirSync(host).sort()).toEqual(["f0", "f1", "f2"]);
    expect(readFileSync(path.join(host, "f0"), "utf8")).toBe("host");
  });

  it("removing a pod's folder while its process swaps a folder being emptied for a symlink to a host folder leaves the host folder whole", async () => {
    // Node's fs.rm walks by path: after the swap it unlinks <folder>/f<i>, which is now the host's f<i>.
    const COUNT = 5_000;
    let raced = 0;
    for (let attempt = 0; attempt < 3 && raced === 0; attempt++) {
      const { pod, host } = fresh();
      fill(host, COUNT, "host");
      const folder = path.join(pod, "volumes", "scratch");
      fill(folder, COUNT, "pod");
      const child = racer(folder, "mtime", [folder], host);
      const out = await lines(child);
      expect(await out.next()).toBe("ready");

      removeTree(pod);

      const report = await out.next();
      await out.done;
      if (report.startsWith("swapped")) raced += 1;
      // Whatever the race did, every host file is still there with its content.
      expect(readdirSync(host)).toHaveLength(COUNT);
      expect(readFileSync(path.join(host, `f${COUNT - 1}`), "utf8")).toBe("host");
      // A second removal (the next start's) takes what the race left, the symlink unfollowed.
      expect(removeTree(pod)).toBeUndefined();
      expect(existsSync(pod)).toBe(false);
      expect(readdirSync(host)).toHaveLength(COUNT);
    }
    // The swap landed mid-walk at least once (else this test proved nothing).
    expect(raced).toBeGreaterThan(0);
  }, 180_000);

  it("preparing a node folder gives a symlink planted in it, not its target (chown -R -P)", () => {
    const { pod: node, host } = fresh();
    fill(host, 1, "host");
    fill(path.join(node, "db", "release"), 1, "cached");
    symlinkSync(host, path.join(node, "db", "host-link"));
    symlinkSync(path.join(host, "f0"), path.join(node, "file-link"));
    const hostOwner = { uid: statSync(host).uid, gid: statSync(host).gid };

    prepareNodeFolder(node, OWNER);
    giveTree(node, OWNER);

    for (const f of [
      path.join(node, "db", "release", "f0"),
      path.join(node, "db", "host-link"),
      path.join(node, "file-link"),
    ])
      expect({ uid: lstatSync(f).uid, gid: lstatSync(f).gid }).toEqual(OWNER);
    expect({ uid: statSync(host).uid, gid: statSync(host).gid }).toEqual(hostOwner);
    expect({ uid: statSync(path.join(host, "f0")).uid, gid: statSync(path.join(host, "f0")).gid }).toEqual(hostOwner);
  });

  it("giving a node folder away while a pod's process swaps its sub-folders for symlinks to a host folder never gives the host folder's files", async () => {
    // Walked by path (lchown per entry listed with readdir), a folder listed as a folder and
    // swapped before the descent is entered through the symlink: the host's files are given away.
    const FOLDERS = 2_000;
    let raced = 0;
    for (let attempt = 0; attempt < 3 && raced === 0; attempt++) {
      const { pod: node, host } = fresh();
      fill(host, 1, "host");
      if (isRoot) chownSync(path.join(host, "f0"), 0, 0);
      const hostOwner = { uid: statSync(path.join(host, "f0")).uid, gid: statSync(path.join(host, "f0")).gid };
      const folders: string[] = [];
      for (let i = 0; i < FOLDERS; i++) {
        const folder = path.join(node, `d${i}`);
        fill(folder, 1, "cached");
        folders.push(folder);
      }
      // Watches the node folder's owner being set: first, before any sub-folder is entered.
      const child = racer(node, "ctime", folders.reverse(), host);
      const out = await lines(child);
      expect(await out.next()).toBe("ready");

      try {
        giveTree(node, OWNER);
      } catch {
        // chown refuses a folder swapped mid-walk: that is the point.
      }

      const report = await out.next();
      await out.done;
      if (report.startsWith("swapped")) raced += 1;
      expect({ uid: statSync(path.join(host, "f0")).uid, gid: statSync(path.join(host, "f0")).gid }).toEqual(hostOwner);
      expect({ uid: statSync(host).uid, gid: statSync(host).gid }).toEqual({
        uid: statSync(work).uid,
        gid: statSync(work).gid,
      });
    }
    expect(raced).toBeGreaterThan(0);
  }, 180_000);
});
