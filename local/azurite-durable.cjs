// Preloaded into the local stack's Azurite process (node --require) when it persists to a folder.
// Azurite keeps its metadata (tables, blob and queue metadata, extent maps) in LokiJS databases
// that it saves on its own every 5 s, each on its own clock: a power cut (SIGKILL of the whole
// process group, the OOM killer) lost up to 5 s of writes that had already been acknowledged, and
// the stores could come back from different moments. This preload makes an acknowledged write
// durable before its acknowledgement leaves, at the cost of one small sequential write:
//
// 1. A write-ahead journal (azurite-journal.cjs for the format): LokiJS's changes since the last
//    commit (the changed documents, whole, and added or removed collections) are appended as one
//    frame to `__blastplane_journal__.<generation>` in the data folder and fdatasynced. Group
//    commit: one commit runs at a time, and every change made while it runs goes into the next
//    one, so N concurrent requests share about two fsyncs, whatever the size of the store.
// 2. The first body bytes (write/end) of every HTTP response wait for the commit that holds the
//    changes made so far (headers are sent with the first body bytes, so nothing leaves earlier).
//    Reads wait only if a change is uncommitted at that moment (nothing uncommitted is ever shown).
// 3. Compaction in the background: once COMPACT_BYTES were appended, the journal moves on to the
//    next generation and each database is written whole (temp file, fsync, rename, folder fsync);
//    a generation is deleted once every database it holds records of has such a snapshot taken
//    after it. Each database's first save (when Azurite opens it) is written whole the same way.
// 4. On start, each database is loaded from its snapshot and the journal's records of it are
//    replayed in order, up to the first torn or damaged frame (a cut mid-append): a commit is one
//    frame, so it is applied whole or not at all, and it was never acknowledged. Records hold the
//    newest state of a document, so replaying a generation onto a newer snapshot is harmless.
// 5. Blob data: Azurite already fdatasyncs an extent's bytes before it records them; a new extent
//    file's folder entry is fsynced here too, once per file.
//
// Written against the pinned versions below: at start it refuses to run on others, loudly, since
// it replaces internals (LokiJS's save, load and change paths, FSExtentStore.prototype.streamPipe).
"use strict";
const fs = require("node:fs");
const http = require("node:http");
const path = require("node:path");

const AZURITE_VERSION = "3.37.0";
const LOKIJS_VERSION = "1.5.12";

const azuriteDir = path.dirname(require.resolve("azurite/package.json"));
const lokiMain = require.resolve("lokijs", { paths: [azuriteDir] });
const lokiDir = path.resolve(path.dirname(lokiMain), "..");
const azuriteVersion = require(path.join(azuriteDir, "package.json")).version;
const lokiVersion = require(path.join(lokiDir, "package.json")).version;
if (azuriteVersion !== AZURITE_VERSION || lokiVersion !== LOKIJS_VERSION) {
  throw new Error(
    `blastplane's durable-write patch (local/azurite-durable.cjs) is written for azurite ${AZURITE_VERSION} with lokijs ${LOKIJS_VERSION}, ` +
      `but azurite ${azuriteVersion} with lokijs ${lokiVersion} is installed. Re-check the patched internals against the new version ` +
      `and update the pinned versions, or install azurite@${AZURITE_VERSION}.`,
  );
}
const Loki = require(lokiMain);
const { default: FSExtentStore } = require(path.join(azuriteDir, "dist/src/common/persistence/FSExtentStore.js"));
for (const [name, target] of [
  ["LokiFsAdapter.prototype.saveDatabase", Loki.LokiFsAdapter?.prototype?.saveDatabase],
  ["Loki.prototype.saveDatabase", Loki.prototype.saveDatabase],
  ["Loki.prototype.loadDatabase", Loki.prototype.loadDatabase],
  ["Loki.prototype.serialize", Loki.prototype.serialize],
  ["Loki.prototype.autosaveClearFlags", Loki.prototype.autosaveClearFlags],
  ["Loki.prototype.addCollection", Loki.prototype.addCollection],
  ["Loki.prototype.removeCollection", Loki.prototype.removeCollection],
  ...[
    "add",
    "update",
    "remove",
    "removeBatchByPositions",
    "clear",
    "get",
    "ensureId",
    "ensureAllIndexes",
    "ensureUniqueIndex",
  ].map((method) => [`Collection.prototype.${method}`, Loki.Collection?.prototype?.[method]]),
  ["FSExtentStore.prototype.streamPipe", FSExtentStore?.prototype?.streamPipe],
]) {
  if (typeof target !== "function")
    throw new Error(`blastplane's durable-write patch: ${name} is missing from azurite ${azuriteVersion}`);
}

const journal = require("./azurite-journal.cjs");

journal.trackChanges(Loki);

const JOURNAL_PREFIX = "__blastplane_journal__.";
/** Journal bytes after which it is compacted into the databases' files (a test lowers it). */
const COMPACT_BYTES = Number(process.env.BLASTPLANE_AZURITE_COMPACT_BYTES) || 8 * 1024 * 1024;
const noop = () => undefined;

function syncDirectory(dir, callback) {
  fs.open(dir, "r", (openError, fd) => {
    if (openError) return callback(openError);
    fs.fsync(fd, (syncError) => fs.close(fd, () => callback(syncError)));
  });
}
const syncDirectoryP = (dir) =>
  new Promise((resolve, reject) => syncDirectory(dir, (e) => (e ? reject(e) : resolve())));

/**
 * Temp file, fsync, rename, folder fsync (LokiJS 1.5.12 renamed an unsynced file: after a cut it
 * could be empty). The temp name is LokiJS's own (`<db>~`): one whole write of a database runs at
 * a time (its first save, then compactions, one after another).
 */
function writeFileDurably(file, text, callback) {
  const temp = `${file}~`;
  fs.open(temp, "w", (openError, fd) => {
    if (openError) return callback(openError);
    fs.writeFile(fd, text, (writeError) => {
      const finish = (error) =>
        fs.close(fd, (closeError) => (error || closeError ? callback(error || closeError) : rename()));
      if (writeError) return finish(writeError);
      fs.fsync(fd, finish);
    });
  });
  function rename() {
    fs.rename(temp, file, (renameError) =>
      renameError ? callback(renameError) : syncDirectory(path.dirname(file), callback),
    );
  }
}

const state = {
  /** The data folder (every database's file is in it; so is the journal). */
  dir: undefined,
  /** The generation new commits append to. */
  gen: 0,
  /** Journal files by generation: path, the databases it holds records of, its open handle. */
  files: new Map(),
  /** Records of earlier runs, by database file name, until that database is loaded. */
  earlier: new Map(),
  /** Bytes appended since the last compaction began. */
  appended: 0,
};
/** Every file-backed database (learnt when it loads or first saves). */
const databases = new Set();
/** Those whose first snapshot is on disk: their later saves are journal commits. */
const snapshotted = new Set();
/** By database file name: the generation current when its newest durable snapshot was serialized. */
const snapshotGen = new Map();

const nameOf = (db) => path.basename(db.filename);
const journalPath = (gen) => path.join(state.dir, `${JOURNAL_PREFIX}${String(gen).padStart(12, "0")}`);

/** Reads the journal left by earlier runs (once, when the first database shows up). */
function openJournal(db) {
  const dir = path.dirname(path.resolve(db.filename));
  databases.add(db);
  if (state.dir !== undefined) {
    if (dir !== state.dir) throw new Error(`azurite journal: databases in two folders (${state.dir}, ${dir})`);
    return;
  }
  state.dir = dir;
  let last = 0;
  const found = fs
    .readdirSync(dir)
    .filter((f) => f.startsWith(JOURNAL_PREFIX) && /^\d+$/.test(f.slice(JOURNAL_PREFIX.length)))
    .map((f) => Number(f.slice(JOURNAL_PREFIX.length)))
    .sort((x, y) => x - y);
  for (const gen of found) {
    const file = journalPath(gen);
    const { frames, validBytes, torn } = journal.readFrames(fs.readFileSync(file));
    const dbs = new Set();
    for (const frame of frames) {
      for (const [name, ops] of Object.entries(frame)) {
        if (!Array.isArray(ops)) continue;
        dbs.add(name);
        const list = state.earlier.get(name) ?? [];
        for (const op of ops) list.push(op);
        state.earlier.set(name, list);
      }
    }
    if (torn) process.stderr.write(`azurite journal: ignored a torn commit at byte ${validBytes} of ${file}\n`);
    state.files.set(gen, { path: file, dbs, handle: undefined, busy: false });
    last = gen;
  }
  // Never append after what may be a torn frame: this run starts a generation of its own.
  state.gen = last + 1;
}

function noteSnapshot(name, gen) {
  if (!(snapshotGen.get(name) >= gen)) snapshotGen.set(name, gen);
  deleteCovered();
}

/** Deletes each older generation whose databases all have a durable snapshot taken after it. */
function deleteCovered() {
  for (const [gen, file] of state.files) {
    if (gen >= state.gen || file.busy) continue;
    if (![...file.dbs].every((name) => snapshotGen.get(name) > gen)) continue;
    state.files.delete(gen);
    const handle = file.handle;
    file.handle = undefined;
    fs.unlink(file.path, () => handle?.close().catch(noop));
  }
}

// Each database's first save (Azurite saves each one when it opens it) is written whole, so a
// database file exists before anything of it is journaled; later saves are journal commits.
Loki.LokiFsAdapter.prototype.saveDatabase = function saveSnapshotDurably(dbname, dbstring, done) {
  const gen = state.gen;
  writeFileDurably(dbname, dbstring, (error) => {
    if (!error && state.dir !== undefined) noteSnapshot(path.basename(dbname), gen);
    done(error);
  });
};

const originalSave = Loki.prototype.saveDatabase;
Loki.prototype.saveDatabase = function journaledSave(callback) {
  if (this.persistenceMethod !== "fs") return originalSave.call(this, callback);
  openJournal(this);
  const report = (error) => {
    if (callback) callback(error);
    else if (error) process.stderr.write(`azurite durable save failed: ${error.message}\n`);
  };
  if (!snapshotted.has(this)) {
    return originalSave.call(this, (error) => {
      if (!error) snapshotted.add(this);
      report(error);
    });
  }
  this.autosaveClearFlags();
  const committed = commit();
  if (!committed) return setImmediate(report);
  committed.then(() => report(), report);
};

const originalLoad = Loki.prototype.loadDatabase;
Loki.prototype.loadDatabase = function replayingLoad(options, callback) {
  if (this.persistenceMethod !== "fs") return originalLoad.call(this, options, callback);
  openJournal(this);
  return originalLoad.call(this, options, (error) => {
    const ops = state.earlier.get(nameOf(this));
    if (!error && ops) {
      journal.replay(this, ops);
      state.earlier.delete(nameOf(this));
    }
    if (typeof callback === "function") callback(error);
  });
};

/** Appends one frame to generation `gen` and fdatasyncs it. */
async function append(gen, frame, names) {
  let file = state.files.get(gen);
  if (!file) {
    file = { path: journalPath(gen), dbs: new Set(), handle: undefined, busy: false };
    state.files.set(gen, file);
  }
  // Before the write: a file that may hold a torn part of these records still counts as theirs.
  for (const name of names) file.dbs.add(name);
  file.busy = true;
  try {
    if (!file.handle) {
      file.handle = await fs.promises.open(file.path, "a");
      await syncDirectoryP(state.dir);
    }
    let written = 0;
    while (written < frame.length) {
      const { bytesWritten } = await file.handle.write(frame, written, frame.length - written);
      written += bytesWritten;
    }
    await file.handle.datasync();
  } finally {
    file.busy = false;
  }
}

/** One group commit: takes every database's changes, appends them as one frame, fdatasyncs. */
async function writeCommit() {
  const payload = {};
  const names = [];
  for (const db of databases) {
    const ops = journal.takeChanges(db);
    if (ops.length === 0) continue;
    payload[nameOf(db)] = ops;
    names.push(nameOf(db));
  }
  journal.markTaken();
  if (names.length === 0) return;
  const frame = journal.encodeFrame(payload);
  const gen = state.gen;
  try {
    await append(gen, frame, names);
  } catch (error) {
    // Not acknowledged: the changes go into the next commit, in a new generation (never after a
    // frame that may be torn).
    const again = JSON.parse(frame.subarray(journal.HEADER_BYTES).toString("utf8"));
    for (const db of databases) if (again[nameOf(db)]) journal.restoreChanges(db, again[nameOf(db)]);
    if (state.gen === gen) state.gen += 1;
    throw error;
  }
  state.appended += frame.length;
  if (state.appended >= COMPACT_BYTES) scheduleCompaction();
  else deleteCovered();
}

let committing;
let next;
function startCommit() {
  const running = writeCommit().finally(() => {
    if (committing === running) committing = undefined;
  });
  return running;
}

/**
 * Makes every change so far durable: the promise of the commit that holds them, or undefined when
 * nothing is uncommitted or being committed. Commits run one at a time; changes made during one
 * share the next.
 */
function commit() {
  if (!journal.hasChanges()) return committing;
  if (!committing) {
    committing = startCommit();
    return committing;
  }
  if (!next) {
    next = committing.catch(noop).then(() => {
      next = undefined;
      committing = startCommit();
      return committing;
    });
  }
  return next;
}

let compacting = false;
function scheduleCompaction() {
  if (compacting) return;
  compacting = true;
  setImmediate(() =>
    compact()
      .catch((error) => process.stderr.write(`azurite journal compaction failed: ${error?.message}\n`))
      .finally(() => {
        compacting = false;
      }),
  );
}

/** Moves the journal to a new generation and writes each database whole, one after another. */
async function compact() {
  const inFlight = committing;
  state.gen += 1;
  state.appended = 0;
  for (const db of [...snapshotted]) {
    const gen = state.gen;
    const text = db.serialize();
    await new Promise((resolve, reject) => writeFileDurably(db.filename, text, (e) => (e ? reject(e) : resolve())));
    snapshotGen.set(nameOf(db), Math.max(snapshotGen.get(nameOf(db)) ?? 0, gen));
    await new Promise((resolve) => setImmediate(resolve));
  }
  await inFlight?.catch(noop);
  deleteCovered();
}

// 2. Hold a response's first body bytes until the changes made so far are on disk.
const HELD = Symbol("blastplane.durable.held");
const RELEASED = Symbol("blastplane.durable.released");
const originalWrite = http.ServerResponse.prototype.write;
const originalEnd = http.ServerResponse.prototype.end;

function hold(response, kind, args) {
  const queued = response[HELD];
  if (queued === RELEASED) return undefined;
  if (queued) {
    queued.push([kind, args]);
    return queued;
  }
  const saving = commit();
  if (!saving) {
    response[HELD] = RELEASED;
    return undefined;
  }
  const calls = [[kind, args]];
  response[HELD] = calls;
  saving.then(
    () => {
      response[HELD] = RELEASED;
      for (const [k, a] of calls) (k === "write" ? originalWrite : originalEnd).apply(response, a);
    },
    (error) => {
      response[HELD] = RELEASED;
      // Never acknowledge what is not on disk: the client sees a dropped connection and retries.
      process.stderr.write(`azurite journal commit failed; dropping the response: ${error?.message}\n`);
      response.destroy(error);
    },
  );
  return calls;
}

http.ServerResponse.prototype.write = function durableWrite(...args) {
  if (!hold(this, "write", args)) return originalWrite.apply(this, args);
  return true;
};
http.ServerResponse.prototype.end = function durableEnd(...args) {
  if (!hold(this, "end", args)) return originalEnd.apply(this, args);
  return this;
};

// 3. A new extent file's folder entry on disk before the blob that points into it is acknowledged.
const syncedExtentFiles = new Set();
const originalStreamPipe = FSExtentStore.prototype.streamPipe;
FSExtentStore.prototype.streamPipe = async function durableStreamPipe(rs, ws, fd, contextId) {
  const count = await originalStreamPipe.call(this, rs, ws, fd, contextId);
  const file = typeof ws.path === "string" ? ws.path : undefined;
  if (file && !syncedExtentFiles.has(file)) {
    await new Promise((resolve, reject) =>
      syncDirectory(path.dirname(file), (error) => (error ? reject(error) : resolve())),
    );
    syncedExtentFiles.add(file);
  }
  return count;
};

process.stdout.write(
  `blastplane durable writes on (write-ahead journal; azurite ${azuriteVersion}, lokijs ${lokiVersion})\n`,
);
