import http from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import type { ReadableStream as NodeReadableStream } from "node:stream/web";
import { describe, expect, it } from "vitest";
import { cursorId, liveFramesOf, parseCursor } from "../../shared/console/live-feed.js";
import { createSseStream, encodeFrame, type SseEnd } from "../../shared/http/sse.js";
import type { AuditEntry } from "../../shared/ops/audit.js";

const entry = (
  action: string,
  outcome: AuditEntry["outcome"],
  details: Record<string, unknown>,
  target = "apr_0123456789abcdef01234567",
): AuditEntry => ({
  audit_id: "0b7e7c1e-1111-4111-8111-111111111111",
  at: "2026-11-27T10:00:00.000Z",
  actor: { oid: "oid-x", name: "X" },
  action,
  target,
  outcome,
  request_id: "req-1",
  details,
  visibility_floor: "Approver",
});

describe("live frames from audit entries (shared/console/live-feed.ts)", () => {
  it("C-320: core-stage outcomes become frames; allow-listed ids only, no raw errors or resource targets", () => {
    const failed = liveFramesOf(
      entry("console.action_executed", "failed", {
        action_type: "kill_switch",
        action_target: "/subscriptions/0000/resourceGroups/rg",
        result: { error: "ECONNREFUSED 10.0.0.4:443 at https://acct.blob.core.windows.net/?sig=abc" },
      }),
      false,
    );
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({
      kind: "failed_result",
      action_type: "kill_switch",
      replay: false,
      link: "/console",
    });
    expect(JSON.stringify(failed)).not.toMatch(/ECONNREFUSED|subscriptions|sig=/);

    const kinds = (e: AuditEntry) => liveFramesOf(e, false).map((f) => f.kind);
    expect(kinds(entry("console.enqueue_hil", "succeeded", { action_type: "kill_switch" }))).toEqual([
      "approval_needed",
    ]);
    expect(kinds(entry("console.approve_hil", "succeeded", { decision: "reject" }))).toEqual(["denied"]);
    expect(kinds(entry("console.approve_hil", "succeeded", { decision: "approve" }))).toEqual(["approval_decided"]);
    expect(kinds(entry("console.approve_hil", "denied", { reason: "no_self_approval" }))).toEqual(["denied"]);
    expect(kinds(entry("console.action_executed", "succeeded", {}))).toEqual(["action_succeeded"]);
    expect(
      kinds(
        entry(
          "ops.event_processed",
          "succeeded",
          { event_id: "EVT-1", event_type: "job.failed", decision: "observe" },
          "job/1",
        ),
      ),
    ).toEqual(["event_ingested", "verdict"]);
    expect(
      liveFramesOf(
        entry(
          "ops.event_processed",
          "succeeded",
          { event_type: "incident.severity_changed" },
          "incident/INC-0123456789ab",
        ),
        true,
      ),
    ).toEqual([
      expect.objectContaining({
        kind: "severity_changed",
        incident_id: "INC-0123456789ab",
        link: "/console?incident=INC-0123456789ab",
        replay: true,
      }),
    ]);
    // Tool calls, token reveals and the like are not core-stage frames.
    expect(kinds(entry("console.tool_call", "succeeded", {}, "query_audit"))).toEqual([]);
  });

  it("a Last-Event-ID is only ever an id this stream made", () => {
    const cursor = { at: "2026-11-27T10:00:00.000Z", audit_id: "0b7e7c1e-1111-4111-8111-111111111111" };
    expect(parseCursor(cursorId(cursor))).toEqual(cursor);
    for (const bad of ["", "x", "2026-11-27T10:00:00Z~a", "2026-11-27T10:00:00.000Z~a b", "2026-13-45T10:00:00.000Z~a"])
      expect(parseCursor(bad), bad).toBeUndefined();
  });

  it("a frame's data cannot inject SSE fields or end the frame early", () => {
    expect(
      encodeFrame({ event: "live\nevent: x", data: { text: "a\n\nevent: admin\ndata: 1" }, id: "1\nretry: 1" }),
    ).toBe('id: 1retry: 1\nevent: liveevent: x\ndata: {"text":"a\\n\\nevent: admin\\ndata: 1"}\n\n');
  });
});

describe("slow readers (shared/http/sse.ts)", () => {
  it("C-320: a client that reads nothing is dropped once its unread output passes the bound; memory stays bounded", async () => {
    const MAX = 64 * 1024;
    let serving!: (ended: Promise<SseEnd>) => void;
    const ended = new Promise<Promise<SseEnd>>((resolve) => {
      serving = resolve;
    });
    let peak = 0;
    const server = http.createServer((_req, res) => {
      const { body, channel } = createSseStream({
        heartbeatMs: 60_000,
        backlogBytes: () => res.writableLength,
        maxBacklogBytes: MAX,
      });
      serving(channel.ended);
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      Readable.fromWeb(body as NodeReadableStream<Uint8Array>).pipe(res);
      // A producer that never stops: only the bound ends it.
      const frame = { event: "live", data: { pad: "x".repeat(4096) } };
      const pump = () => {
        for (let i = 0; i < 16; i++) if (!channel.send(frame)) return;
        peak = Math.max(peak, res.writableLength);
        setImmediate(pump);
      };
      pump();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as AddressInfo).port;
    const req = http.get({ port, host: "127.0.0.1" }, (res) => res.pause());
    // The test cuts the connection itself at the end.
    req.on("error", () => undefined);
    expect(await await ended).toBe("slow_reader");
    // What the server holds for this client never exceeded the bound (plus one frame in flight).
    expect(peak).toBeLessThanOrEqual(MAX + 4200);
    req.destroy();
    server.closeAllConnections();
    server.close();
  });
});
