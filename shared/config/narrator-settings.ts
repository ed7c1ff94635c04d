import { z } from "zod";
import { envEnum, envInt } from "./env.js";
import { isLoopbackUrl } from "../storage/endpoints.js";

/**
 * The narrator's settings (issue 27 item 1). `SVC_NARRATOR=none` (the default) keeps every turn
 * deterministic; `openai` talks to one OpenAI-compatible chat-completions endpoint through the
 * official `openai` package: Azure OpenAI with an Entra token from the process's one credential,
 * or — in local mode only — any server that speaks the same API (llama.cpp's server, Ollama,
 * vLLM), with an optional API key given as a secret reference.
 */
export const NARRATOR_KINDS = ["none", "openai"] as const;

const secretRef = z
  .string()
  .regex(
    /^(kv:[A-Za-z0-9-]{1,127}|env:[A-Z_][A-Z0-9_]{0,127})$/,
    "must be a secret reference: kv:<secret name> or env:<VARIABLE>",
  );

/** The settings' zod fields; `appSettingsSchema` spreads them, so `loadConfig` validates them. */
export const narratorSettingsShape = {
  /** `none` (default: no language model) or `openai` (an OpenAI-compatible chat-completions endpoint). */
  SVC_NARRATOR: envEnum(NARRATOR_KINDS).default("none"),
  /** The endpoint: an Azure OpenAI resource (`https://<name>.openai.azure.com`) or, locally, a server's `/v1` base. */
  SVC_NARRATOR_BASE_URL: z
    .string()
    .refine((v) => URL.canParse(v) && /^https?:$/.test(new URL(v).protocol), "must be an absolute http(s) URL")
    .refine((v) => !URL.canParse(v) || (!new URL(v).username && !new URL(v).password), "must not carry credentials")
    .optional(),
  /** The model (Azure: the deployment name). */
  SVC_NARRATOR_MODEL: z
    .string()
    .regex(/^[\w.:/-]{1,100}$/, "must be a model or deployment name")
    .optional(),
  /** Local mode only: the API key of a local server, as a secret reference. Azure uses the Entra token. */
  SVC_NARRATOR_API_KEY_REF: secretRef.optional(),
  /** How long one provider call may take, in milliseconds (a turn makes up to two). */
  SVC_NARRATOR_TIMEOUT_MS: envInt(1000, 120_000).default(20_000),
};

/** The narrator as configured. */
export type NarratorSettings =
  | { readonly kind: "none" }
  | {
      readonly kind: "openai";
      /** `azure`: `AzureOpenAI` with the Entra token; `compatible`: the plain client (local mode only). */
      readonly flavor: "azure" | "compatible";
      readonly baseUrl: string;
      readonly model: string;
      readonly apiKeyRef: string | undefined;
      readonly timeoutMs: number;
    };

const AZURE_OPENAI_HOST = /\.(openai\.azure\.com|cognitiveservices\.azure\.com|services\.ai\.azure\.com)$/i;

type NarratorValues = {
  SVC_NARRATOR: (typeof NARRATOR_KINDS)[number];
  SVC_NARRATOR_BASE_URL?: string | undefined;
  SVC_NARRATOR_MODEL?: string | undefined;
  SVC_NARRATOR_API_KEY_REF?: string | undefined;
  SVC_NARRATOR_TIMEOUT_MS: number;
};

/**
 * Checks the settings together and returns the narrator's; `problems` receives one
 * `NAME: problem` per refusal. Outside local mode an API key reference and a plain-HTTP endpoint
 * are refused (no API keys in Azure: the process's managed identity gets the Entra token).
 */
export function narratorSettings(c: NarratorValues, local: boolean, problems: string[]): NarratorSettings {
  if (c.SVC_NARRATOR === "none") {
    for (const name of ["SVC_NARRATOR_BASE_URL", "SVC_NARRATOR_MODEL", "SVC_NARRATOR_API_KEY_REF"] as const)
      if (c[name] !== undefined) problems.push(`${name}: is set but SVC_NARRATOR is none (set SVC_NARRATOR=openai)`);
    return { kind: "none" };
  }
  if (c.SVC_NARRATOR_BASE_URL === undefined)
    problems.push("SVC_NARRATOR_BASE_URL: is required with SVC_NARRATOR=openai");
  if (c.SVC_NARRATOR_MODEL === undefined) problems.push("SVC_NARRATOR_MODEL: is required with SVC_NARRATOR=openai");
  if (!local) {
    if (c.SVC_NARRATOR_API_KEY_REF !== undefined)
      problems.push(
        "SVC_NARRATOR_API_KEY_REF: API keys are for local mode only; in Azure the narrator uses the managed identity's Entra token",
      );
    if (c.SVC_NARRATOR_BASE_URL?.startsWith("http://"))
      problems.push("SVC_NARRATOR_BASE_URL: must be https:// outside local mode");
  }
  const baseUrl = c.SVC_NARRATOR_BASE_URL ?? "";
  const host = URL.canParse(baseUrl) ? new URL(baseUrl).hostname : "";
  // Locally anything but an Azure OpenAI host is a plain OpenAI-compatible server; in Azure every
  // endpoint is reached with the Entra token.
  const flavor =
    local && (c.SVC_NARRATOR_API_KEY_REF !== undefined || isLoopbackUrl(baseUrl) || !AZURE_OPENAI_HOST.test(host))
      ? "compatible"
      : "azure";
  return {
    kind: "openai",
    flavor,
    baseUrl,
    model: c.SVC_NARRATOR_MODEL ?? "",
    apiKeyRef: c.SVC_NARRATOR_API_KEY_REF,
    timeoutMs: c.SVC_NARRATOR_TIMEOUT_MS,
  };
}
