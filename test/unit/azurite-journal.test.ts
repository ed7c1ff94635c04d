import { createRequire } from "node:module";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";

// The journal of the embedded Azurite's durable writes (local/azurite-journal.cjs), driven against
// the LokiJS that Azurite itself loads: a commit is one frame; a cut at any byte of the journal
// leaves whole commits applied and the torn one ignored, never half of it.

const require = createRequire(import.meta.url);
const azuriteDir = path.dirname(require.resolve("azurite/package.json"));
// biome-ignore lint/suspicious/noExplicitAny: LokiJS ships no types.
type Any = any;
const Loki: Any = require(require.resolve("lokijs", { paths: [azuriteDir] }));
const journal: Any = require("../../local/azurite-journal.cjs");

const BLOBS = "$BLOBS_COLLECTION$";
const BLOCKS = "$BLOCKS_COLLECTION$";

beforeAll(() => journal.trackChanges(Loki));

function newDb(name: string): Any {
  return new Loki(name, { persistenceMethod: "memory" });
}

/** Everything a reader can see: each collection's documents, in order, with their metadata. */
function stateOf(db: Any): string {
  const collections = [...db.collections]
    .sort((a: Any, b: Any) => a.name.localeCompare(b.name))
    .map((c: Any) => ({ name: c.name, maxId: c.maxId, docs: c.data }));
  return JSON.stringify(collections);
}

function loaded(snapshot: string, name: string): Any {
  const db = newDb(name);
  db.loadJSON(snapshot);
  return db;
}

interface Recorded {
  snapshots: Record<string, string>;
  frames: Buffer[];
  /** After each commit (index k: after k commits), both databases' visible state. */
  states: Record<string, string>[];
  /** Snapshots taken after commit 3 (for replay onto a newer snapshot). */
  later: Record<string, string>;
}

/**
 * Two databases changed the way Azurite changes them (blob metadata: unique and binary indices,
 * inserts, updates in place, single and batch removal, a collection dropped and created again; a
 * second database changed in the same commits), one frame per commit.
 */
function record(): Recorded {
  const meta = newDb("meta.json");
  const extents = newDb("extents.json");
  const blobs = meta.addCollection(BLOBS, { indices: ["containerName"], unique: ["key"] });
  meta.addCollection(BLOCKS, { indices: ["blobName"] });
  const ext = extents.addCollection("$EXTENTS_COLLECTION$", { indices: ["id"] });
  for (let i = 0; i < 3; i++) blobs.insert({ key: `seed-${i}`, containerName: "c", size: i });
  journal.takeChanges(meta);
  journal.takeChanges(extents);
  const snapshots = { "meta.json": meta.serialize(), "extents.json": extents.serialize() };
  const frames: Buffer[] = [];
  const states = [{ "meta.json": stateOf(meta), "extents.json": stateOf(extents) }];
  let later: Record<string, string> = {};
  const commit = () => {
    const payload: Record<string, unknown> = {};
    for (const [name, db] of [
      ["meta.json", meta],
      ["extents.json", extents],
    ] as const) {
      const ops = journal.takeChanges(db);
      if (ops.length > 0) payload[name] = ops;
    }
    frames.push(journal.encodeFrame(payload));
    states.push({ "meta.json": stateOf(meta), "extents.json": stateOf(extents) });
  };
  const steps: (() => void)[] = [
    () => {
      for (let i = 0; i < 5; i++) blobs.insert({ key: `b${i}`, containerName: "c", size: 10 + i });
      ext.insert({ id: "e1", path: "/x/e1", size: 100 });
    },
    () => {
      const doc = blobs.by("key", "b1");
      doc.size = 999;
      blobs.update(doc);
      blobs.remove(blobs.by("key", "seed-0"));
    },
    () => {
      blobs.findAndRemove({ containerName: "c", size: { $lt: 12 } });
      ext.findAndUpdate({ id: "e1" }, (e: Any) => {
        e.size = 200;
      });
    },
    () => {
      // Inserted and removed within one commit; the newest document removed (its id must not come back).
      const gone = blobs.insert({ key: "short-lived", containerName: "d", size: 1 });
      blobs.remove(gone);
      const top = blobs.insert({ key: "top", containerName: "d", size: 2 });
      blobs.remove(top);
      meta.getCollection(BLOCKS).insert({ blobName: "b4", id: "blk" });
    },
    () => {
      later = { "meta.json": meta.serialize(), "extents.json": extents.serialize() };
      meta.removeCollection(BLOCKS);
      const again = meta.addCollection(BLOCKS, { indices: ["blobName"] });
      again.insert({ blobName: "b3", id: "blk2" });
      blobs.insert({ key: "b-after", containerName: "c", size: 5 });
    },
    () => {
      ext.clear();
      ext.insert({ id: "e2", path: "/x/e2", size: 7 });
      const doc = blobs.by("key", "b4");
      blobs.update({ ...doc, size: 4444 });
    },
  ];
  for (const step of steps) {
    step();
    commit();
  }
  return { snapshots, frames, states, later };
}

function replayed(snapshots: Record<string, string>, journalBytes: Buffer): Record<string, Any> {
  const dbs: Record<string, Any> = {
    "meta.json": loaded(snapshots["meta.json"] as string, "meta.json"),
    "extents.json": loaded(snapshots["extents.json"] as string, "extents.json"),
  };
  const { frames } = journal.readFrames(journalBytes);
  for (const name of Object.keys(dbs)) {
    const ops = frames.flatMap((f: Any) => f[name] ?? []);
    journal.replay(dbs[name], ops);
  }
  return dbs;
}

describe("the embedded Azurite's write-ahead journal (issue 24 item 1)", () => {
  it("a cut at every byte of the journal leaves exactly the whole commits before it applied: a torn last commit is ignored, never half-applied", () => {
    const { snapshots, frames, states } = record();
    const bytes = Buffer.concat(frames);
    const ends: number[] = [];
    let at = 0;
    for (const f of frames) {
      at += f.length;
      ends.push(at);
    }
    for (let cut = 0; cut <= bytes.length; cut++) {
      const whole = ends.filter((end) => end <= cut).length;
      const read = journal.readFrames(bytes.subarray(0, cut));
      expect(read.frames.length).toBe(whole);
      expect(read.torn).toBe(cut !== (ends[whole - 1] ?? 0));
      const dbs = replayed(snapshots, bytes.subarray(0, cut));
      const expected = states[whole] as Record<string, string>;
      expect(stateOf(dbs["meta.json"]), `cut at byte ${cut}`).toBe(expected["meta.json"]);
      expect(stateOf(dbs["extents.json"]), `cut at byte ${cut}`).toBe(expected["extents.json"]);
    }
  });

  it("after a replay the indices answer for the replayed documents and new documents never reuse an id", () => {
    const { snapshots, frames } = record();
    const db = replayed(snapshots, Buffer.concat(frames))["meta.json"];
    const blobs = db.getCollection(BLOBS);
    expect(blobs.by("key", "b4").size).toBe(4444);
    expect(blobs.by("key", "seed-0")).toBeUndefined();
    expect(blobs.find({ containerName: "c" }).map((d: Any) => d.key)).toEqual(
      expect.arrayContaining(["b-after", "b4", "b3"]),
    );
    expect(() => blobs.insert({ key: "b4", containerName: "c" })).toThrow();
    const fresh = blobs.insert({ key: "new", containerName: "e" });
    // Higher than any id a record ever named, removed ones included.
    const ids = frames.flatMap((f) => journal.readFrames(f).frames[0]["meta.json"] ?? []);
    const highest = Math.max(...ids.map((op: Any) => (op[0] === "u" ? op[2].$loki : op[0] === "r" ? op[2] : 0)));
    expect(fresh.$loki).toBeGreaterThan(highest);
    expect(db.getCollection(BLOCKS).find({ blobName: "b3" })).toHaveLength(1);
    expect(db.getCollection(BLOCKS).find({ blobName: "b4" })).toHaveLength(0);
  });

  it("replaying the whole journal onto a snapshot newer than its start (a compaction cut before the old generation was deleted) ends at the newest state", () => {
    const { later, frames, states } = record();
    const dbs = replayed(later, Buffer.concat(frames));
    const last = states.at(-1) as Record<string, string>;
    expect(stateOf(dbs["meta.json"])).toBe(last["meta.json"]);
    expect(stateOf(dbs["extents.json"])).toBe(last["extents.json"]);
  });

  it("a damaged byte in a commit ends the journal there (CRC), so nothing after it is applied either", () => {
    const { frames } = record();
    const bytes = Buffer.concat(frames);
    const second = (frames[0] as Buffer).length + 12;
    bytes[second] = (bytes[second] as number) ^ 0xff;
    const read = journal.readFrames(bytes);
    expect(read.frames).toHaveLength(1);
    expect(read.validBytes).toBe((frames[0] as Buffer).length);
    expect(read.torn).toBe(true);
    // Zeros where a cut left a file's tail unwritten are no frame either.
    expect(journal.readFrames(Buffer.alloc(64)).frames).toHaveLength(0);
  });
});
