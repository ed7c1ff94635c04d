import type { TokenCredential } from "@azure/identity";
import { NO_NARRATOR, type Narrator } from "../coordinator/narrator.js";
import type { UsageLedger } from "../usage/usage-ledger.js";
import type { NarratorSettings } from "../../config/narrator-settings.js";
import { createOpenAiNarrator } from "./openai-narrator.js";

/**
 * The configured narrator: none, or the OpenAI-compatible adapter. The API key (local mode only)
 * is resolved from its secret reference on the first call, so a missing secret fails that turn
 * (the coordinator then answers deterministically), not the app's start.
 */
export function buildNarrator(
  settings: NarratorSettings,
  deps: {
    credential: TokenCredential;
    usage: UsageLedger;
    resolveSecret(ref: string): Promise<string>;
    onUsageError?(error: unknown): void;
  },
): Narrator {
  if (settings.kind === "none") return NO_NARRATOR;
  const { apiKeyRef } = settings;
  return createOpenAiNarrator({
    flavor: settings.flavor,
    baseUrl: settings.baseUrl,
    model: settings.model,
    timeoutMs: settings.timeoutMs,
    credential: deps.credential,
    usage: deps.usage,
    ...(apiKeyRef ? { apiKey: () => deps.resolveSecret(apiKeyRef) } : {}),
    ...(deps.onUsageError ? { onUsageError: deps.onUsageError } : {}),
  });
}
