import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { writeFileDurably } from "../storage/durable-file.js";

/** Where secrets live: Key Vault in Azure, a private folder in the local stack. */
export interface SecretStore {
  get(name: string): Promise<string | undefined>;
  set(name: string, value: string): Promise<void>;
  /**
   * Reads, changes and writes one secret with no other update in between, across processes (a
   * compare-and-swap). Stores that cannot (Key Vault keeps the last write) leave it out; callers
   * then write and check what landed (see {@link ApiTokenService.rotate}).
   */
  update?(name: string, change: (value: string | undefined) => string): Promise<string>;
}

/** How long a lock file may sit before it counts as left behind by a process that died. */
const STALE_LOCK_MS = 10_000;

/** Holds `<file>.lock` (created exclusively) while `work` runs; other processes wait their turn. */
async function withLockFile<T>(file: string, work: () => Promise<T>): Promise<T> {
  const lock = `${file}.lock`;
  for (let waited = 0; ; waited += 10) {
    try {
      await writeFile(lock, String(process.pid), { flag: "wx", mode: 0o600 });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const since = await stat(lock).then(
        (s) => Date.now() - s.mtimeMs,
        () => 0,
      );
      if (since > STALE_LOCK_MS) await rm(lock, { force: true });
      else if (waited > 4 * STALE_LOCK_MS) throw new Error("secret store is locked");
      else await new Promise((r) => setTimeout(r, 10));
    }
  }
  try {
    return await work();
  } finally {
    await rm(lock, { force: true });
  }
}

/** A folder of secret files (mode 0600), one per name; the local stack's stand-in for Key Vault. */
export function createFileSecretStore(dir: string): SecretStore {
  const file = (name: string) => {
    if (!/^[a-z0-9-]{1,64}$/.test(name)) throw new Error("invalid secret name");
    return path.join(dir, name);
  };
  const store: Required<SecretStore> = {
    async get(name) {
      try {
        return await readFile(file(name), "utf8");
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
        throw error;
      }
    },
    async set(name, value) {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      // Durable before the caller acknowledges a regenerated token: a power cut must not bring back the old one.
      await writeFileDurably(file(name), value, { mode: 0o600 });
    },
    async update(name, change) {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      return withLockFile(file(name), async () => {
        const next = change(await store.get(name));
        await store.set(name, next);
        return next;
      });
    },
  };
  return store;
}

export const API_TOKEN_SECRET = "jobapi-api-token";

/** The stored token state: the current token and, during a rotation grace period, the previous one. */
export interface ApiTokenState {
  current: { value: string; created_at: string };
  previous?: { value: string; rotated_at: string; valid_until: string };
  /**
   * Tokens replaced before `previous` whose grace has not ended: a burst of rotations must not cut
   * off the token clients were using before it. Expired ones are dropped at each rotation.
   */
  earlier?: { value: string; valid_until: string }[];
}

/** Grace tokens kept at most; a burst longer than this within one grace period drops the oldest. */
const MAX_GRACE_TOKENS = 32;

/** `state` rotated to `token`: its current token and every unexpired predecessor stay valid for their grace. */
function rotatedState(old: ApiTokenState | undefined, token: string, now: Date, graceSeconds: number): ApiTokenState {
  const state: ApiTokenState = { current: { value: token, created_at: now.toISOString() } };
  if (!old || graceSeconds <= 0) return state;
  state.previous = {
    value: old.current.value,
    rotated_at: now.toISOString(),
    valid_until: new Date(now.getTime() + graceSeconds * 1000).toISOString(),
  };
  const earlier = [...(old.previous ? [old.previous] : []), ...(old.earlier ?? [])]
    .filter((t) => new Date(t.valid_until) > now)
    .map((t) => ({ value: t.value, valid_until: t.valid_until }))
    .slice(0, MAX_GRACE_TOKENS - 1);
  if (earlier.length > 0) state.earlier = earlier;
  return state;
}

/** The state with `token` (handed out by a rotation another writer overwrote) kept valid for the grace. */
function withGraceToken(state: ApiTokenState, token: string, now: Date, graceSeconds: number): ApiTokenState {
  const validUntil = new Date(now.getTime() + graceSeconds * 1000).toISOString();
  return {
    ...state,
    earlier: [{ value: token, valid_until: validUntil }, ...(state.earlier ?? [])].slice(0, MAX_GRACE_TOKENS - 1),
  };
}

/** Every token the state accepts at `now`, current first. */
function validTokens(state: ApiTokenState, now: Date): string[] {
  const out = [state.current.value];
  for (const t of [...(state.previous ? [state.previous] : []), ...(state.earlier ?? [])]) {
    if (new Date(t.valid_until) > now) out.push(t.value);
  }
  return out;
}

function digest(value: string): Buffer {
  return createHash("sha256").update(value, "utf8").digest();
}

/** Compares two secrets in constant time (over their SHA-256 digests, so lengths never leak). */
export function secretsEqual(presented: string, expected: string): boolean {
  return timingSafeEqual(digest(presented), digest(expected));
}

export function generateApiToken(): string {
  return `bpt_${randomBytes(32).toString("base64url")}`;
}

/** Options of {@link ApiTokenService}. */
export interface ApiTokenServiceOptions {
  /** How long a read state is reused before the store is read again (default 2000). */
  cacheMs?: number;
  /** The clock (tests set it). */
  now?: () => Date;
}

/** Options of {@link ApiTokenService.state}. */
export interface ApiTokenStateOptions {
  /** Read the store, not the cache. */
  fresh?: boolean;
}

/**
 * The job API's shared token (`X-SVC-API-Token`). Several tokens may be valid at once: the current
 * one and, until its grace period ends, the one it replaced — so callers survive a rotation.
 */
export class ApiTokenService {
  private cache: { state: ApiTokenState; at: number } | undefined;
  /** Rotations in this process, one after another (see {@link rotate}). */
  private rotating: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly secrets: SecretStore,
    private readonly options: ApiTokenServiceOptions = {},
  ) {}

  private now(): Date {
    return this.options.now ? this.options.now() : new Date();
  }

  async state(options: ApiTokenStateOptions = {}): Promise<ApiTokenState | undefined> {
    const cacheMs = this.options.cacheMs ?? 2000;
    if (!options.fresh && this.cache && Date.now() - this.cache.at < cacheMs) return this.cache.state;
    const text = await this.secrets.get(API_TOKEN_SECRET);
    if (!text) return undefined;
    const state = JSON.parse(text) as ApiTokenState;
    this.cache = { state, at: Date.now() };
    return state;
  }

  /** Creates the first token when none exists (first start of the local stack). */
  async ensure(): Promise<void> {
    if (await this.state()) return;
    await this.write({ current: { value: generateApiToken(), created_at: this.now().toISOString() } });
  }

  /**
   * Replaces the token; the old one stays valid for `graceSeconds`. Returns the new state.
   * Rotations run one after another, each on the stored state (never the cache), so two at once
   * (a double click, two owners) chain: every token handed out stays valid at least for the grace.
   */
  rotate(graceSeconds: number): Promise<ApiTokenState> {
    const run = this.rotating.then(() => this.rotateNow(graceSeconds));
    this.rotating = run.catch(() => {});
    return run;
  }

  private async rotateNow(graceSeconds: number): Promise<ApiTokenState> {
    const token = generateApiToken();
    const now = this.now();
    const { update } = this.secrets;
    if (update) {
      // Compare-and-swap: no other process's rotation lands between the read and the write.
      let state!: ApiTokenState;
      await update.call(this.secrets, API_TOKEN_SECRET, (text) => {
        state = rotatedState(text ? (JSON.parse(text) as ApiTokenState) : undefined, token, now, graceSeconds);
        return JSON.stringify(state);
      });
      this.cache = { state, at: Date.now() };
      return state;
    }
    // Last write wins (Key Vault): write, read back, and while another writer's state has replaced
    // ours, write theirs again with our token kept for the grace period.
    const state = rotatedState(await this.state({ fresh: true }), token, now, graceSeconds);
    await this.write(state);
    for (let attempt = 0; attempt < 5; attempt++) {
      const landed = await this.state({ fresh: true });
      if (!landed || validTokens(landed, this.now()).includes(token)) break;
      await this.write(withGraceToken(landed, token, now, graceSeconds));
    }
    return state;
  }

  private async write(state: ApiTokenState): Promise<void> {
    await this.secrets.set(API_TOKEN_SECRET, JSON.stringify(state));
    this.cache = { state, at: Date.now() };
  }

  /** True when `presented` equals a currently valid token. Every candidate is compared, always. */
  async isValid(presented: string | null | undefined): Promise<boolean> {
    if (!presented) return false;
    const arrivedAt = performance.now();
    const state = await this.state();
    if (!state) return false;
    if (this.accepts(state, presented)) return true;
    // Not in the cached state: another process (the dashboard backend) may have regenerated the
    // token since this cache was read, and a caller holding the new token must not get a 401 (the
    // power-cut suite caught a dashboard submit failing so, within 2 s of a regenerate). Check once
    // more against a read that started after this request arrived; such reads are shared by all
    // waiting requests, so a stream of wrong tokens costs at most one store read at a time.
    const fresh = await this.stateReadSince(arrivedAt);
    return fresh !== undefined && this.accepts(fresh, presented);
  }

  private accepts(state: ApiTokenState, presented: string): boolean {
    let ok = false;
    for (const token of validTokens(state, this.now())) ok = secretsEqual(presented, token) || ok;
    return ok;
  }

  private freshRead: { startedAt: number; read: Promise<ApiTokenState | undefined> } | undefined;

  /** The stored state, from a read that started at or after `since` (joining one in flight if it did). */
  private async stateReadSince(since: number): Promise<ApiTokenState | undefined> {
    for (;;) {
      const running = this.freshRead;
      if (running && running.startedAt >= since) return running.read;
      if (running) {
        await running.read.catch(() => undefined);
        continue;
      }
      const entry = { startedAt: performance.now(), read: this.state({ fresh: true }) };
      this.freshRead = entry;
      entry.read
        .finally(() => {
          if (this.freshRead === entry) this.freshRead = undefined;
        })
        .catch(() => undefined);
      return entry.read;
    }
  }
}
