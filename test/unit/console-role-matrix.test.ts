import { beforeAll, describe, expect, it } from "vitest";
import { ROLES, type Role } from "../../shared/auth/roles.js";
import { meetsFloor, refusalText } from "../../shared/console/tools/tool.js";
import { consoleHarness, callerWith } from "../support/console-harness.js";
import { azuriteTables } from "../support/service-fakes.js";

const azurite = azuriteTables("matrix");
let h: ReturnType<typeof consoleHarness>;

beforeAll(() => {
  h = consoleHarness(azurite.tables());
});

/** Spec §2.2: each tool's floor and side-effect class, and a canonical command that invokes it. */
const TOOLS: Record<string, { floor: Role; cls: string; command: string }> = {
  describe_event: {
    floor: "Reader",
    cls: "read",
    command: 'describe_event {"event_type":"job.failed","resource_ref":"blast_job/j-failed"}',
  },
  explain_verdict: {
    floor: "Reader",
    cls: "read",
    command: "explain_verdict event_id=00000000-0000-4000-8000-000000000000",
  },
  explore_catalog: { floor: "Reader", cls: "read", command: "explore_catalog query=job.failed" },
  query_audit: { floor: "Reader", cls: "read", command: "query_audit limit=5" },
  query_llm_usage: { floor: "Reader", cls: "read", command: "query_llm_usage group_by=model lookback_days=7" },
  query_inventory: { floor: "Reader", cls: "read", command: "query_inventory kind=summary" },
  query_subscription_scope: { floor: "Reader", cls: "read", command: "query_subscription_scope" },
  query_subscription_health: { floor: "Reader", cls: "read", command: "query_subscription_health" },
  query_detection_readiness: { floor: "Reader", cls: "read", command: "query_detection_readiness" },
  query_t2_recovery: { floor: "Reader", cls: "read", command: "query_t2_recovery" },
  query_configuration_baseline: { floor: "Reader", cls: "read", command: "query_configuration_baseline" },
  capture_browser_evidence: {
    floor: "Reader",
    cls: "read",
    command:
      "capture_browser_evidence policy_id=status-page policy_version=1 source_url=https://status.example.org stable_selectors=main",
  },
  query_log: { floor: "Reader", cls: "read", command: "query_log template=failed_requests window=30m" },
  query_metric: {
    floor: "Reader",
    cls: "read",
    command: "query_metric namespace=Microsoft.ContainerService/managedClusters metric=node_cpu_usage_percentage",
  },
  query_deployments: { floor: "Reader", cls: "read", command: "query_deployments window=24h" },
  correlate_incident: { floor: "Reader", cls: "read", command: "correlate_incident incident_id=INC-000000000000" },
  search_tools: { floor: "Reader", cls: "read", command: "search_tools" },
  describe_tool: { floor: "Reader", cls: "read", command: "describe_tool name=query_audit" },
  simulate_change: {
    floor: "Contributor",
    cls: "simulate",
    command: 'simulate_change {"event_type":"job.failed","resource_ref":"blast_job/j-failed"}',
  },
  approve_hil: {
    floor: "Approver",
    cls: "approve",
    command: 'approve_hil approval_id=apr_000000000000000000000000 decision=reject justification="matrix check"',
  },
  list_hil: { floor: "Approver", cls: "read", command: "list_hil" },
  run_runbook: {
    floor: "Contributor",
    cls: "execute",
    command: 'run_runbook name=retry_failed_job params={"job_id":"j-failed"} dry_run=true',
  },
  activate_break_glass: {
    floor: "Reader",
    cls: "breakglass",
    command: 'activate_break_glass reason="matrix test of the break-glass path" expiry=600',
  },
};
const NAMES = Object.keys(TOOLS);
/** Rows about one tool's floor, asserted by that tool's cells. */
const CELL_ROWS: Record<string, string[]> = {
  simulate_change: ["C-113"],
  approve_hil: ["C-116"],
  list_hil: ["C-119"],
  run_runbook: ["C-121"],
  activate_break_glass: ["C-123"],
};

describe("console tool catalog", () => {
  it("C-060 C-061 C-062 C-065 C-066 C-112: installs exactly the §2.2 tools, each a snake_case verb with one sentence, an argument hint, the spec's floor and class", () => {
    expect(h.registry.names().sort()).toEqual([...NAMES].sort());
    for (const d of h.registry.search("Owner")) {
      expect(d.name).toMatch(/^[a-z][a-z0-9_]*$/);
      expect(d.verb).toBe(d.name);
      expect(d.description).toMatch(/^[A-Z][^.!?]*[.]$/);
      expect(d.argument_hint.startsWith(d.name)).toBe(true);
      expect(ROLES).toContain(d.rbac_floor);
      expect(["read", "simulate", "approve", "execute", "breakglass"]).toContain(d.side_effect_class);
      expect([d.rbac_floor, d.side_effect_class]).toEqual([TOOLS[d.name]?.floor, TOOLS[d.name]?.cls]);
    }
  });

  it("C-070 C-071: discovery returns descriptor fields only, with no handler or way to invoke", () => {
    for (const d of h.registry.search("Owner")) {
      expect(Object.keys(d).sort()).toEqual([
        "argument_hint",
        "description",
        "failure_modes",
        "name",
        "rbac_floor",
        "side_effect_class",
        "verb",
      ]);
      expect(Object.values(d).some((v) => typeof v === "function")).toBe(false);
    }
  });
});

// Each cell below names the rows it asserts (computed ids); the describe names them for the ledger.
describe("every (role, tool) cell: C-015 C-016 C-017 refusals above the role, C-072 a Reader invokes every read tool, C-113 C-116 C-119 C-121 C-123 floors", () => {
  for (const role of ROLES) {
    it(`C-014 C-111 C-129 C-347: a ${role} discovers exactly the tools at or below its role, never enqueue_hil`, async () => {
      const expected = NAMES.filter((n) => meetsFloor(role, TOOLS[n]?.floor ?? "Owner")).sort();
      expect(
        h.registry
          .search(role)
          .map((d) => d.name)
          .sort(),
      ).toEqual(expected);
      const reply = await h.coordinator.handleTurn(callerWith(role), { text: "search_tools" });
      const data =
        reply.tool_results[0]?.status === "ok"
          ? (reply.tool_results[0].data as { tools: { name: string }[] })
          : undefined;
      expect(data?.tools.map((t) => t.name).sort()).toEqual(expected);
      for (const name of NAMES) {
        const described = await h.coordinator.handleTurn(callerWith(role), { text: `describe_tool name=${name}` });
        expect(described.tool_results[0]?.status).toBe(expected.includes(name) ? "ok" : "error");
      }
      expect(h.registry.search(role).some((d) => d.name === "enqueue_hil")).toBe(false);
    });

    for (const name of NAMES) {
      const spec = TOOLS[name];
      if (!spec) continue;
      const allowed = meetsFloor(role, spec.floor);
      const ids = allowed
        ? ["C-347", ...(role === "Reader" && spec.cls === "read" ? ["C-072"] : []), ...(CELL_ROWS[name] ?? [])]
        : ["C-015", "C-016", "C-017", "C-347", ...(CELL_ROWS[name] ?? [])];
      it(`${ids.join(" ")}: ${role} × ${name} is ${allowed ? "invoked" : "refused with the exact text"}`, async () => {
        const requestId = `matrix-${role}-${name}`;
        const reply = await h.coordinator.handleTurn(callerWith(role), { text: spec.command }, requestId);
        const logged = (await h.audit.list({ limit: 1000 })).filter((e) => e.request_id === requestId);
        if (!allowed) {
          expect(reply.kind).toBe("refused");
          expect(reply.text).toBe(refusalText(name, spec.floor, role));
          expect(reply.text).toBe(
            `Refused: the tool ${name} requires the ${spec.floor} role; your current role is ${role}. The tool was not invoked.`,
          );
          expect(reply.tool_results).toEqual([]);
          expect(logged).toEqual([]);
          // Deterministic: the same request gets the same reply.
          expect((await h.coordinator.handleTurn(callerWith(role), { text: spec.command }, requestId)).text).toBe(
            reply.text,
          );
        } else {
          expect(reply.kind).toBe("tool_result");
          const result = reply.tool_results[0];
          expect(result?.tool).toBe(name);
          if (result?.status !== "ok") expect(result?.error.type).not.toBe("forbidden");
          // describe_event leaves no audit entry; every other invoked tool leaves one carrying its class.
          if (name === "describe_event") expect(logged).toEqual([]);
          else
            expect(
              logged.filter((e) => e.action === "console.tool_call").map((e) => e.details.side_effect_class),
            ).toEqual([spec.cls]);
        }
      });
    }
  }

  it("C-346: a principal with no role is blocked from every tool", async () => {
    for (const name of NAMES) {
      const reply = await h.coordinator.handleTurn(callerWith(undefined), { text: TOOLS[name]?.command ?? name });
      expect(reply.kind).toBe("blocked");
      expect(reply.tool_results).toEqual([]);
    }
  });

  it("C-122: run_runbook with dry_run=false is not executed for a Contributor or an Approver (filed for approval) and runs for an Owner", async () => {
    const command = 'run_runbook name=retry_failed_job params={"job_id":"j-failed"} dry_run=false';
    for (const role of ["Contributor", "Approver"] as const) {
      const before = h.executed.length;
      const reply = await h.coordinator.handleTurn(callerWith(role), { text: command });
      expect(reply.kind).toBe("approval_filed");
      expect(reply.text).toContain(`requires the Owner role; your current role is ${role}`);
      expect(h.executed.length).toBe(before);
    }
    const reply = await h.coordinator.handleTurn(callerWith("Owner"), { text: command });
    expect(reply.kind).toBe("tool_result");
    expect(reply.tool_results[0]?.status).toBe("ok");
    expect(h.executed.at(-1)?.action).toEqual({ action_type: "retry_job", target: "blast_job/j-failed", params: {} });
  });

  it("C-129: enqueue_hil cannot be invoked directly by any role", async () => {
    for (const role of ROLES) {
      const reply = await h.coordinator.handleTurn(callerWith(role), { text: "enqueue_hil approval=1" });
      expect(reply.kind).toBe("refused");
      expect(reply.text).toContain("The tool was not invoked");
    }
  });
});
