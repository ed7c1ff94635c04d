import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../shared/config/load-config.js";
import { TRANSLATION_DISCARDED } from "../../shared/console/coordinator/narrator-rules.js";
import {
  AZURE_OPENAI_API_VERSION,
  AZURE_OPENAI_SCOPE,
  createOpenAiNarrator,
} from "../../shared/console/narrators/openai-narrator.js";
import { type FakeOpenAi, startFakeOpenAi } from "../support/fake-openai.js";
import { fakeCredential, narratorWorld, passOf } from "../support/narrator-world.js";
import { azuriteTables } from "../support/service-fakes.js";

const azurite = azuriteTables("narad");
let fake: FakeOpenAi;
beforeAll(async () => {
  fake = await startFakeOpenAi();
});
afterAll(async () => {
  await fake?.close();
});
beforeEach(() => fake.reset());

const LOCAL = { AzureWebJobsStorage: "UseDevelopmentStorage=true", AUTH_TENANT_ID: "t", AUTH_CLIENT_ID: "c" };
const AZURE = {
  AzureWebJobsStorage__accountName: "stabc",
  AzureWebJobsStorage__credential: "managedidentity",
  AUTH_TENANT_ID: "t",
  AUTH_CLIENT_ID: "c",
};
const problemsOf = (env: Record<string, string>) => {
  try {
    loadConfig(env);
    return [];
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
};

describe("narrator settings (loadConfig)", () => {
  it("default none; openai needs a base URL and a model; the names are SVC_NARRATOR*", () => {
    expect(loadConfig(LOCAL).narrator).toEqual({ kind: "none" });
    expect(problemsOf({ ...LOCAL, SVC_NARRATOR: "openai" })).toEqual([
      "SVC_NARRATOR_BASE_URL: is required with SVC_NARRATOR=openai",
      "SVC_NARRATOR_MODEL: is required with SVC_NARRATOR=openai",
    ]);
    expect(problemsOf({ ...LOCAL, SVC_NARRATOR: "gpt" })[0]).toMatch(/^SVC_NARRATOR: must be one of none, openai/);
    expect(problemsOf({ ...LOCAL, SVC_NARRATOR_TIMEOUT_MS: "10" })[0]).toMatch(/^SVC_NARRATOR_TIMEOUT_MS: /);
    expect(problemsOf({ ...LOCAL, SVC_NARRATOR_MODEL: "m" })).toEqual([
      "SVC_NARRATOR_MODEL: is set but SVC_NARRATOR is none (set SVC_NARRATOR=openai)",
    ]);
  });

  it("locally a loopback server is the plain OpenAI-compatible client, with an optional key reference", () => {
    const config = loadConfig({
      ...LOCAL,
      SVC_NARRATOR: "openai",
      SVC_NARRATOR_BASE_URL: "http://127.0.0.1:8080/v1",
      SVC_NARRATOR_MODEL: "qwen2.5-7b-instruct",
      SVC_NARRATOR_API_KEY_REF: "env:LOCAL_LLM_KEY",
    });
    expect(config.narrator).toEqual({
      kind: "openai",
      flavor: "compatible",
      baseUrl: "http://127.0.0.1:8080/v1",
      model: "qwen2.5-7b-instruct",
      apiKeyRef: "env:LOCAL_LLM_KEY",
      timeoutMs: 20_000,
    });
  });

  it("outside local mode: Azure OpenAI with the Entra token; an API key reference and plain HTTP refuse to start", () => {
    expect(
      loadConfig({
        ...AZURE,
        SVC_NARRATOR: "openai",
        SVC_NARRATOR_BASE_URL: "https://aoai-blast.openai.azure.com",
        SVC_NARRATOR_MODEL: "gpt-4o-mini",
      }).narrator,
    ).toMatchObject({ kind: "openai", flavor: "azure", apiKeyRef: undefined });
    expect(
      problemsOf({
        ...AZURE,
        SVC_NARRATOR: "openai",
        SVC_NARRATOR_BASE_URL: "http://aoai-blast.openai.azure.com",
        SVC_NARRATOR_MODEL: "gpt-4o-mini",
        SVC_NARRATOR_API_KEY_REF: "kv:aoai-key",
      }),
    ).toEqual([
      "SVC_NARRATOR_API_KEY_REF: API keys are for local mode only; in Azure the narrator uses the managed identity's Entra token",
      "SVC_NARRATOR_BASE_URL: must be https:// outside local mode",
    ]);
    expect(problemsOf({ ...LOCAL, SVC_NARRATOR_API_KEY_REF: "plain-key-value" })[0]).toMatch(
      /^SVC_NARRATOR_API_KEY_REF: must be a secret reference/,
    );
  });
});

describe("the OpenAI adapter over the vendor's wire format", () => {
  it("compatible flavor: POST /v1/chat/completions with the key from its reference, the model, and function tools", async () => {
    const narrator = createOpenAiNarrator({
      flavor: "compatible",
      baseUrl: fake.url,
      model: "local-model",
      timeoutMs: 5000,
      maxRetries: 0,
      apiKey: async () => "local-key-1",
    });
    fake.script({ tool_calls: [{ name: "job_report", arguments: { job_id: "j-7" } }] });
    const before = fake.requests.length;
    const proposal = await narrator.translate?.({
      text: "why did job j-7 fail?",
      priorTurns: [],
      tools: [
        {
          name: "job_report",
          description: "Reports jobs.",
          argument_hint: "job_report job_id=<id>",
          side_effect_class: "read",
          parameters: { type: "object", properties: { job_id: { type: "string" } } },
        },
      ],
    });
    expect(proposal?.calls).toMatchObject([{ name: "job_report", arguments: '{"job_id":"j-7"}' }]);
    const request = fake.requests[before];
    expect(request?.url).toBe("/v1/chat/completions");
    expect(request?.headers.authorization).toBe("Bearer local-key-1");
    expect(request?.body).toMatchObject({
      model: "local-model",
      tool_choice: "auto",
      tools: [{ type: "function", function: { name: "job_report", parameters: { type: "object" } } }],
    });
  });

  it("azure flavor: AzureOpenAI to the deployment's path with the API version and an Entra bearer token from the process credential (no key)", async () => {
    const credential = fakeCredential("entra-abc");
    const narrator = createOpenAiNarrator({
      flavor: "azure",
      baseUrl: fake.origin,
      model: "gpt-4o-mini",
      timeoutMs: 5000,
      maxRetries: 0,
      credential,
    });
    fake.script({ content: "ambiguous" });
    const before = fake.requests.length;
    await narrator.translate?.({ text: "hello", priorTurns: [], tools: [] });
    const request = fake.requests[before];
    expect(request?.url).toBe(
      `/openai/deployments/gpt-4o-mini/chat/completions?api-version=${AZURE_OPENAI_API_VERSION}`,
    );
    expect(request?.headers.authorization).toBe("Bearer entra-abc");
    expect(request?.headers["api-key"]).toBeUndefined();
    expect(credential.scopes).toContain(AZURE_OPENAI_SCOPE);
  });
});

describe("translation through the coordinator (rule 1 holds; the canonical parser and the tool's validation decide)", () => {
  it("C-013: the narrator is offered only the principal's visible tool schemas, each with its arguments' JSON Schema", async () => {
    const w = narratorWorld(azurite.tables(), fake);
    fake.script({ content: "ambiguous" }, { content: "Which job do you mean?" });
    const reader = await w.turn("what is going on?", "Reader");
    const offered = reader.requests[0]?.body.tools.map((t: { function: { name: string } }) => t.function.name);
    expect(offered).toEqual(expect.arrayContaining(["job_report", "cluster_view", "failing_read", "simulate_fixture"]));
    expect(offered).not.toContain("run_runbook");
    expect(offered).not.toContain("approvals_view");
    const schema = reader.requests[0]?.body.tools.find(
      (t: { function: { name: string } }) => t.function.name === "job_report",
    ).function.parameters;
    expect(schema).toMatchObject({ type: "object", properties: { job_id: { type: "string" } } });
    fake.script({ content: "ambiguous" }, { content: "Which job do you mean?" });
    const approver = await w.turn("what is going on?", "Approver");
    expect(approver.requests[0]?.body.tools.map((t: { function: { name: string } }) => t.function.name)).toEqual(
      expect.arrayContaining(["run_runbook", "approvals_view"]),
    );
  });

  it("a proposed call becomes a canonical command, re-parsed and run with its tool's validation", async () => {
    const w = narratorWorld(azurite.tables(), fake);
    fake.script({ tool_calls: [{ name: "job_report", arguments: { job_id: "j-7" } }] }, { content: "not json" });
    const { reply, audit } = await w.turn("why did j-7 fail?");
    expect(reply.kind).toBe("tool_result");
    expect(reply.steps).toMatchObject([
      { command: 'job_report {"job_id":"j-7"}', tool: "job_report", status: "ok", evidence_ref: "audit:job-report-1" },
    ]);
    expect(audit.find((e) => e.action === "console.tool_call")?.details).toMatchObject({ args: { job_id: "j-7" } });
  });

  it("C-063: a call whose arguments fail the tool's schema, or are not JSON, runs nothing and is audited as discarded", async () => {
    const w = narratorWorld(azurite.tables(), fake);
    for (const args of ['{"job_id":"j-7","limit":5}', "{job_id: j-7", '["j-7"]']) {
      fake.script({ tool_calls: [{ name: "job_report", arguments: args }] });
      const { reply, audit } = await w.turn("why did j-7 fail?");
      expect(reply).toMatchObject({ kind: "abstention", text: TRANSLATION_DISCARDED, tool_results: [] });
      expect(audit.map((e) => e.action)).toEqual(["console.translation_discarded"]);
    }
    expect(w.log).toEqual([]);
  });

  it("C-015 C-017: a Reader's narrator proposing a higher-role tool (not offered) runs nothing and reveals nothing", async () => {
    const w = narratorWorld(azurite.tables(), fake);
    fake.script({ tool_calls: [{ name: "run_runbook", arguments: { name: "cancel_job", dry_run: false } }] });
    const { reply, audit } = await w.turn("cancel everything now");
    expect(reply.kind).toBe("abstention");
    expect(reply.text).not.toContain("run_runbook");
    expect(audit[0]?.details).toMatchObject({ reason: "tool_not_available" });
    fake.script({ tool_calls: [{ name: "enqueue_hil", arguments: {} }] });
    expect((await w.turn("queue this for someone")).reply.kind).toBe("abstention");
    expect(w.log).toEqual([]);
  });

  it("C-058 C-059: a provider failure (500, 429, a malformed body, a hang past the timeout) gets the reasoning-unavailable reply, with nothing run", async () => {
    const w = narratorWorld(azurite.tables(), fake, { narrator: { timeoutMs: 300 } });
    for (const reply of [{ status: 500 }, { status: 429 }, { raw: "{not json" }, { hang: true }]) {
      fake.script(reply);
      const turn = await w.turn("why did j-7 fail?");
      expect(turn.reply.kind).toBe("reasoning_unavailable");
      expect(turn.reply.text).toMatch(/temporarily unavailable/);
      expect(turn.requests.map(passOf)).toEqual(["translation"]);
    }
    expect(w.log).toEqual([]);
  });

  it("closing the transport aborts the provider request (abortSignal reaches the openai client and the server sees the close)", async () => {
    const w = narratorWorld(azurite.tables(), fake);
    fake.script({ hang: true });
    const controller = new AbortController();
    const arrived = fake.nextRequest();
    const turn = w.turn("why did j-7 fail?", "Reader", { hooks: { abortSignal: controller.signal } });
    await arrived;
    const aborted = fake.nextAbort();
    controller.abort();
    expect((await aborted).body.messages.at(-1).content).toBe("why did j-7 fail?");
    expect((await turn).reply.kind).toBe("reasoning_unavailable");
  });
});
