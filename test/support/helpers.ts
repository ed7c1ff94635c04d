import { expect } from "vitest";
import { ConfigError } from "../../shared/config/env.js";
import { type FieldIssue, ValidationError } from "../../shared/errors.js";
import { type JobRecord, newJobId, newJobRecord } from "../../shared/jobs/model.js";

/** A small seeded PRNG (mulberry32): deterministic test data in [0, 1). */
export function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The issues of the ValidationError `fn` throws; fails the test on anything else. */
export function issuesOf(fn: () => unknown): readonly FieldIssue[] {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    return (error as ValidationError).issues;
  }
  throw new Error("expected a ValidationError, but nothing was thrown");
}

/** The ConfigError `load` throws; fails the test when it throws nothing or something else. */
export function configRefusal(load: () => unknown): ConfigError {
  try {
    load();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error("expected a ConfigError, but the configuration was accepted");
}

/** A queued job-API job record (a fresh id, one blastn query) with `overrides`, for store tests. */
export function jobRecordFixture(overrides: Partial<JobRecord> = {}): JobRecord {
  return {
    ...newJobRecord({
      job_id: newJobId(),
      program: "blastn",
      db_name: "demo",
      db_version: "2026-01-01-00-00-00",
      db_location: "local",
      blast_version: "2.12.0+",
      blast_options: {},
      priority: 50,
      execution_profile: "standard",
      resource_profile: "",
      submission_source: "external_api",
      external_correlation_id: "",
      idempotency_key: "",
      fingerprint: "",
      query_count: 1,
      query_letters: 10,
    }),
    ...overrides,
  };
}

/** A new blastn job of one 10-letter query against the release `2026-01-01-00-00-00` of `demo`. */
export function testJobRecord(): JobRecord {
  return jobRecordFixture({ db_location: "local://databases/demo/2026-01-01-00-00-00" });
}
