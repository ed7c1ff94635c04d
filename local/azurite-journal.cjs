// The write-ahead journal behind the embedded Azurite's durable writes (see azurite-durable.cjs):
// the pieces that need no file system, so a test can drive them against LokiJS directly.
//
// - trackChanges(Loki): patches LokiJS so every change to a collection (insert, update, remove,
//   clear) and every collection added or removed is remembered until takeChanges(db) collects it.
//   What is remembered is which document changed, not how: takeChanges serializes each one as it is
//   at that moment ("u": its whole current state, "r": it is gone), so a record always holds the
//   newest state and replaying records in order, even onto a newer snapshot, ends at the newest.
// - encodeFrame / readFrames: one commit is one frame, [u32 length][u32 CRC-32][JSON payload]. A
//   frame that is short, fails its CRC or does not parse ends the file: a torn last write is
//   ignored whole, never half-applied (a commit's changes of several databases share one frame).
// - replay(db, ops): applies a database's records onto its loaded snapshot.
"use strict";

const CHANGES = Symbol("blastplane.journal.changes");
const LOG = Symbol("blastplane.journal.log");
const HEADER_BYTES = 8;

const CRC_TABLE = (() => {
  const table = new Int32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c;
  }
  return table;
})();

function crc32(buffer) {
  let crc = -1;
  for (let i = 0; i < buffer.length; i++) crc = CRC_TABLE[(crc ^ buffer[i]) & 0xff] ^ (crc >>> 8);
  return (crc ^ -1) >>> 0;
}

/** One commit as bytes: header (payload length, payload CRC-32, little-endian) and the JSON payload. */
function encodeFrame(payload) {
  const body = Buffer.from(JSON.stringify(payload), "utf8");
  const frame = Buffer.allocUnsafe(HEADER_BYTES + body.length);
  frame.writeUInt32LE(body.length, 0);
  frame.writeUInt32LE(crc32(body), 4);
  body.copy(frame, HEADER_BYTES);
  return frame;
}

/**
 * The whole frames at the start of `buffer`, up to the first that is incomplete or damaged.
 * `validBytes` is where they end; `torn` whether anything follows them.
 */
function readFrames(buffer) {
  const frames = [];
  let offset = 0;
  while (offset + HEADER_BYTES <= buffer.length) {
    const length = buffer.readUInt32LE(offset);
    const end = offset + HEADER_BYTES + length;
    if (length === 0 || end > buffer.length) break;
    const body = buffer.subarray(offset + HEADER_BYTES, end);
    if (crc32(body) !== buffer.readUInt32LE(offset + 4)) break;
    let payload;
    try {
      payload = JSON.parse(body.toString("utf8"));
    } catch {
      break;
    }
    if (payload === null || typeof payload !== "object" || Array.isArray(payload)) break;
    frames.push(payload);
    offset = end;
  }
  return { frames, validBytes: offset, torn: offset < buffer.length };
}

let replaying = false;
let pendingAny = false;

function changesOf(collection) {
  let changes = collection[CHANGES];
  if (!changes) {
    changes = { cleared: false, ids: new Set() };
    collection[CHANGES] = changes;
  }
  return changes;
}

function touch(collection, id) {
  if (replaying || typeof id !== "number") return;
  changesOf(collection).ids.add(id);
  pendingAny = true;
}

function logOf(db) {
  let log = db[LOG];
  if (!log) {
    log = [];
    db[LOG] = log;
  }
  return log;
}

/**
 * Moves a collection's remembered changes onto its database's ordered log: each document as it is
 * now (a copy when the log outlives this tick: LokiJS strips `$loki` from a document it removes).
 */
function flushCollection(log, collection, copy) {
  const changes = collection[CHANGES];
  if (!changes || (!changes.cleared && changes.ids.size === 0)) return;
  if (changes.cleared) log.push(["x", collection.name]);
  for (const id of changes.ids) {
    const doc = collection.get(id);
    if (!doc) log.push(["r", collection.name, id]);
    else log.push(["u", collection.name, copy ? JSON.parse(JSON.stringify(doc)) : doc]);
  }
  collection[CHANGES] = undefined;
}

/**
 * Patches LokiJS (once) so changes are remembered. Every path that changes a document ends in one
 * of these (insert → add; update of an array → update of each; removeWhere, findAndRemove and
 * Resultset.remove → remove or removeBatchByPositions). Remembering a document that did not
 * change in the end is harmless: its record holds its current state.
 */
function trackChanges(Loki) {
  if (Loki[CHANGES]) return;
  Loki[CHANGES] = true;
  const Collection = Loki.Collection;
  const proto = Collection.prototype;
  const { add, update, remove, removeBatchByPositions, clear } = proto;
  proto.add = function trackedAdd(obj) {
    const result = add.call(this, obj);
    touch(this, obj.$loki);
    return result;
  };
  proto.update = function trackedUpdate(doc) {
    if (!Array.isArray(doc) && doc) touch(this, doc.$loki);
    return update.call(this, doc);
  };
  proto.remove = function trackedRemove(doc) {
    if (typeof doc === "number") touch(this, doc);
    else if (doc && !Array.isArray(doc) && typeof doc === "object") touch(this, doc.$loki);
    return remove.call(this, doc);
  };
  proto.removeBatchByPositions = function trackedRemoveBatch(positions) {
    this.ensureId();
    for (const position of positions) touch(this, this.idIndex[position]);
    return removeBatchByPositions.call(this, positions);
  };
  proto.clear = function trackedClear(options) {
    if (!replaying) {
      const changes = changesOf(this);
      changes.cleared = true;
      changes.ids.clear();
      pendingAny = true;
    }
    return clear.call(this, options);
  };
  const { addCollection, removeCollection } = Loki.prototype;
  Loki.prototype.addCollection = function trackedAddCollection(name, options) {
    const exists = this.collections.some((c) => c.name === name);
    const collection = addCollection.call(this, name, options);
    if (!exists && !replaying) {
      logOf(this).push(["c", name, options === undefined ? null : JSON.parse(JSON.stringify(options))]);
      pendingAny = true;
    }
    return collection;
  };
  Loki.prototype.removeCollection = function trackedRemoveCollection(name) {
    const collection = this.collections.find((c) => c.name === name);
    if (collection && !replaying) {
      const log = logOf(this);
      flushCollection(log, collection, true);
      log.push(["d", name]);
      pendingAny = true;
    }
    return removeCollection.call(this, name);
  };
}

/** Whether anything changed since the last takeChanges of every database (cheap; may say yes spuriously). */
function hasChanges() {
  return pendingAny;
}

/** Clears the flag hasChanges reads; call it when every tracked database's changes were taken. */
function markTaken() {
  pendingAny = false;
}

/**
 * The database's changes since the last call, as records in the order they must be replayed.
 * Documents are the live objects: encode them in the same tick.
 */
function takeChanges(db) {
  const log = logOf(db);
  for (const collection of db.collections) flushCollection(log, collection, false);
  db[LOG] = [];
  return log;
}

/** Puts records a failed commit took (decoded again from its frame) back in front of the database's log. */
function restoreChanges(db, ops) {
  db[LOG] = ops.concat(logOf(db));
  pendingAny = true;
}

/** Applies records (takeChanges' output, in order) onto a loaded database without remembering them. */
function replay(db, ops) {
  const staged = new Map();
  const find = (name) => db.collections.find((c) => c.name === name);
  const stage = (collection) => {
    let s = staged.get(collection);
    if (!s) {
      s = { byId: new Map(), maxSeen: 0 };
      for (let i = 0; i < collection.data.length; i++) s.byId.set(collection.data[i].$loki, i);
      staged.set(collection, s);
    }
    return s;
  };
  const finish = (collection) => {
    const s = staged.get(collection);
    if (!s) return;
    staged.delete(collection);
    collection.data = collection.data.filter(Boolean).sort((a, b) => a.$loki - b.$loki);
    collection.idIndex = collection.data.map((doc) => doc.$loki);
    const top = Math.max(s.maxSeen, collection.idIndex.at(-1) ?? 0);
    if (!(collection.maxId >= top)) collection.maxId = top;
    collection.cachedIndex = null;
    collection.cachedBinaryIndex = null;
    collection.cachedData = null;
    collection.ensureAllIndexes(true);
    for (const field of collection.uniqueNames) collection.ensureUniqueIndex(field);
    collection.dirty = true;
  };
  replaying = true;
  try {
    for (const op of ops) {
      const [kind, name] = op;
      const collection = find(name);
      if (kind === "c") {
        if (!collection) db.addCollection(name, op[2] ?? undefined);
      } else if (kind === "d") {
        if (collection) {
          staged.delete(collection);
          db.removeCollection(name);
        }
      } else if (kind === "x") {
        if (collection) {
          staged.delete(collection);
          collection.clear();
        }
      } else if (collection && (kind === "u" || kind === "r")) {
        const s = stage(collection);
        const id = kind === "u" ? op[2].$loki : op[2];
        if (typeof id !== "number") continue;
        if (id > s.maxSeen) s.maxSeen = id;
        const at = s.byId.get(id);
        if (kind === "u") {
          if (at === undefined) s.byId.set(id, collection.data.push(op[2]) - 1);
          else collection.data[at] = op[2];
        } else if (at !== undefined) {
          collection.data[at] = null;
          s.byId.delete(id);
        }
      }
    }
    for (const collection of [...staged.keys()]) finish(collection);
  } finally {
    replaying = false;
  }
}

module.exports = {
  HEADER_BYTES,
  crc32,
  encodeFrame,
  readFrames,
  trackChanges,
  hasChanges,
  markTaken,
  takeChanges,
  restoreChanges,
  replay,
};
