import { spawnSync } from "node:child_process";

/**
 * Removes a folder tree a pod's process may still be changing, without ever following a symlink
 * out of it. The local kubelet runs as root and removes pod folders (`forget`, `stop`, the folders
 * it made for a container's previous start, the stack's node cache) while a pod process that
 * escaped its process group (`setsid`) may still run: Node's `fs.rm` walks by path (lstat, then
 * readdir and unlink through the same path), so a folder swapped for a symlink between those
 * steps makes it delete the link target's files as root. GNU `rm` walks by descriptor (fts:
 * folders opened with `O_NOFOLLOW`, entries removed with `unlinkat` relative to the opened folder):
 * a folder swapped mid-walk is refused, and a symlink is only ever unlinked. A tree a racing
 * process keeps changing may be left partly in place (`rm` then fails; logged by the caller when
 * it has a logger), never anything outside it. Returns rm's complaint, undefined when all is gone.
 */
export function removeTree(target: string): string | undefined {
  const result = spawnSync("rm", ["-rf", "--one-file-system", "--", target], {
    stdio: ["ignore", "ignore", "pipe"],
    encoding: "utf8",
  });
  if (result.error) return result.error.message;
  return result.status === 0 ? undefined : (result.stderr.trim() || `rm exited with ${result.status}`).slice(0, 500);
}

/**
 * Gives a folder tree to `owner` without following a symlink anywhere in it (`chown -R -P`: a
 * symlink's own owner changes, never its target's; folders are opened with `O_NOFOLLOW`, so one
 * swapped for a symlink mid-walk is refused rather than entered). Node's `lchown` per path walked
 * with `readdir` would enter a folder swapped for a symlink between the listing and the descent.
 * Throws with chown's complaint when any part could not be given.
 */
export function giveTree(dir: string, owner: { uid: number; gid: number }): void {
  const result = spawnSync("chown", ["-R", "-P", `${owner.uid}:${owner.gid}`, "--", dir], {
    stdio: ["ignore", "ignore", "pipe"],
    encoding: "utf8",
  });
  if (result.error) throw result.error;
  if (result.status !== 0)
    throw new Error(`could not give ${dir} to ${owner.uid}:${owner.gid}: ${result.stderr.trim().slice(0, 500)}`);
}
