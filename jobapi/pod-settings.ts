import { z } from "zod";
import { DATABASE_NAME } from "../shared/blast/database-builder.js";
import { envEnum, envInt, LOG_LEVELS } from "../shared/config/env.js";
import { RELEASE_NAME } from "../shared/databases/ncbi-source.js";
import { JOB_ID_PATTERN } from "../shared/jobs/model.js";
import {
  checkStorageSettings,
  SHARD_STORAGE_SETTINGS,
  storageSettingsShape,
  WARM_STORAGE_SETTINGS,
} from "../shared/storage/storage-connection.js";

/**
 * The environment of the pods the job API starts on the cluster: a shard (`shard.ts`) and a
 * warm-up (`warm.ts`). The executor sets every one of these; they are declared here, apart from
 * the pods' entry points, so the configuration reference (`npm run docs:config`) can read them.
 */
export const shardSettingsSchema = z
  .object({
    SHARD_JOB_ID: z.string().regex(JOB_ID_PATTERN),
    SHARD_ID: z.string().regex(/^b\d{1,5}(-p\d{1,3})?$/),
    SHARD_BATCH: envInt(0, 99_999),
    SHARD_DB_CACHE_ROOT: z.string().min(1),
    SHARD_DB_NAME: z.string().regex(DATABASE_NAME),
    SHARD_DB_RELEASE: z.string().regex(RELEASE_NAME),
    SHARD_QUERY_FILE: z.string().min(1),
    SHARD_OUTPUT_FILE: z.string().min(1),
    // An Azurite connection string (local), or the Blob URL reached with the pod's workload identity.
    ...storageSettingsShape(SHARD_STORAGE_SETTINGS),
    LOG_LEVEL: envEnum(LOG_LEVELS).default("info"),
  })
  .superRefine(...checkStorageSettings(SHARD_STORAGE_SETTINGS));

export const warmSettingsSchema = z
  .object({
    WARM_DB_NAME: z.string().regex(DATABASE_NAME),
    WARM_DB_RELEASE: z.string().regex(RELEASE_NAME),
    WARM_DB_CACHE_ROOT: z.string().min(1),
    WARM_NODE: z.string().min(1).max(253),
    // An Azurite connection string (local), or the Blob and Table URLs reached with the pod's workload identity.
    ...storageSettingsShape(WARM_STORAGE_SETTINGS),
    LOG_LEVEL: envEnum(LOG_LEVELS).default("info"),
  })
  .superRefine(...checkStorageSettings(WARM_STORAGE_SETTINGS));
