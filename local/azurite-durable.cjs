// Preloaded into the local stack's Azurite process (node --require) when it persists to a folder.
// Azurite keeps its metadata (tables, blob and queue metadata, extent maps) in LokiJS databases
// that it saves on its own every 5 s, each on its own clock: a power cut (SIGKILL of the whole
// process group, the OOM killer) lost up to 5 s of writes that had already been acknowledged, and
// the stores could come back from different moments. This preload makes an acknowledged write
// durable before its acknowledgement leaves:
//
// 1. LokiJS's file adapter writes a temp file, fsyncs it, renames it over the database file and
//    fsyncs the folder (LokiJS 1.5.12 renamed an unsynced file: after a cut it could be empty).
// 2. The first body bytes (write/end) of every HTTP response wait until each database that changed
//    (dirty, or with a save in flight) is saved. LokiJS's throttled saves coalesce: requests that
//    arrive during a save share the next one, so a burst of N writes costs about two saves, not N.
//    Reads wait only if a write is unsaved at that moment (so nothing unsaved is ever shown).
// 3. Blob data: Azurite already fdatasyncs an extent's bytes before it records them; a new extent
//    file's folder entry is fsynced here too, once per file.
//
// Written against the pinned versions below: at start it refuses to run on others, loudly, since
// it replaces internals (LokiFsAdapter.prototype.saveDatabase, FSExtentStore.prototype.streamPipe).
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
  ["Loki.prototype.autosaveDirty", Loki.prototype.autosaveDirty],
  ["FSExtentStore.prototype.streamPipe", FSExtentStore?.prototype?.streamPipe],
]) {
  if (typeof target !== "function")
    throw new Error(`blastplane's durable-write patch: ${name} is missing from azurite ${azuriteVersion}`);
}

function syncDirectory(dir, callback) {
  fs.open(dir, "r", (openError, fd) => {
    if (openError) return callback(openError);
    fs.fsync(fd, (syncError) => fs.close(fd, () => callback(syncError)));
  });
}

// The save of each database file in flight, so a request whose changes it already holds waits for
// it alone instead of for one more save.
const inFlight = new Map();

// 1. Temp file, fsync, rename, folder fsync. The temp name is LokiJS's own (`<db>~`): one save of a
// database runs at a time (throttledSaves), so it is never shared.
Loki.LokiFsAdapter.prototype.saveDatabase = function saveDatabaseDurably(dbname, dbstring, done) {
  let settle;
  const saved = new Promise((resolve, reject) => {
    settle = (error) => (error ? reject(error) : resolve());
  });
  // Waiters get the outcome through their own handlers; this one only keeps an unobserved failure
  // from becoming an unhandled rejection (LokiJS reports it to its own caller).
  saved.catch(() => undefined);
  inFlight.set(dbname, saved);
  const callback = (error) => {
    if (inFlight.get(dbname) === saved) inFlight.delete(dbname);
    settle(error);
    done(error);
  };
  const temp = `${dbname}~`;
  fs.open(temp, "w", (openError, fd) => {
    if (openError) return callback(openError);
    fs.writeFile(fd, dbstring, (writeError) => {
      const finish = (error) =>
        fs.close(fd, (closeError) => (error || closeError ? callback(error || closeError) : rename()));
      if (writeError) return finish(writeError);
      fs.fsync(fd, finish);
    });
  });
  function rename() {
    fs.rename(temp, dbname, (renameError) =>
      renameError ? callback(renameError) : syncDirectory(path.dirname(dbname), callback),
    );
  }
};

// Every file-backed database, learnt from its first save (each store saves once when it opens).
const databases = new Set();
const originalSave = Loki.prototype.saveDatabase;
Loki.prototype.saveDatabase = function registeringSave(callback) {
  if (this.persistenceMethod === "fs") databases.add(this);
  return originalSave.call(this, callback);
};

function saveNow(db) {
  return new Promise((resolve, reject) => {
    originalSave.call(db, (error) => {
      if (!error) return resolve();
      // LokiJS cleared the dirty flags before the failed save: set one again so the change is not
      // forgotten (the next request saves again).
      if (db.collections[0]) db.collections[0].dirty = true;
      reject(error);
    });
  });
}

/** Saves each database with unsaved changes; resolves when they are on disk. */
function persistChanged() {
  const pending = [];
  for (const db of databases) {
    // Changed since the last save began (LokiJS clears the flags as it serializes): one more save,
    // which LokiJS queues behind any in flight. Unchanged: the save in flight, if any, holds every
    // change so far; wait for it alone.
    if (db.autosaveDirty()) pending.push(saveNow(db));
    else if (inFlight.has(db.filename)) pending.push(inFlight.get(db.filename));
  }
  return pending.length > 0 ? Promise.all(pending) : undefined;
}

// 2. Hold a response's first body bytes until the changes made so far are on disk. Headers are
// sent with the first body bytes (writeHead only stores them), so nothing leaves before that.
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
  const saving = persistChanged();
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
      process.stderr.write(`azurite durable save failed; dropping the response: ${error?.message}\n`);
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

process.stdout.write(`blastplane durable writes on (azurite ${azuriteVersion}, lokijs ${lokiVersion})\n`);
