import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, readSse, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

/**
 * README: "What the host could not give back as it was sent is refused, never
 * stored altered". libSQL text columns read back only up to a NUL, so any
 * free-text field stored in its own column must refuse NUL (as message text,
 * ids and keys already do) or be kept inside JSON.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const auth = () => ({ authorization: `Bearer ${host.adminToken}` });

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "nul-fields",
    async onRun({ body }, res) {
      const ctx = body.context;
      const line = (type: string, data: unknown) => res.write(`${JSON.stringify({ run_id: ctx.run_id, type, data })}\n`);
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      if (ctx.input.text === "forge") {
        // An unknown type (ignored, kept in the ledger as sent)...
        line("message.completed\u0000x", { message: { role: "assistant", content: "forged, never applied" } });
        line("run.completed\u0000x", { finish_reason: "forged" });
        line("message.completed", { message: { role: "assistant", content: "real" } });
        line("run.completed", { finish_reason: "stop" });
      } else if (ctx.input.text === "fail") {
        line("run.failed", { code: "upstream\u0000hidden", error: "quota exceeded\u0000 for key sk-123", retryable: false });
      } else {
        line("message.completed", { message: { role: "assistant", content: "ok" } });
        line("run.completed", { finish_reason: "stop" });
      }
      res.end();
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
  expect((await host.admin("POST", "/v1/admin/agents", { agent_id: "nul", name: "nul", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" } })).status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("NUL in free-text fields", () => {
  it("an event's actor or subject text with a NUL is refused (400), not recorded cut short", async () => {
    const refusal = async (extra: Record<string, unknown>) => {
      const posted = await host.admin("POST", "/v1/events", messageEvent("nul-actor", "hi", extra));
      return { status: posted.status, message: posted.body.error?.message };
    };
    const actor = { actor_type: "user", actor_id: "u1" };
    expect(await refusal({ actor: { ...actor, actor_name: "Ada\u0000 Lovelace" } })).toEqual({ status: 400, message: expect.stringMatching(/actor_name.*NUL/s) });
    expect(await refusal({ actor: { ...actor, actor_type: "us\u0000er" } })).toEqual({ status: 400, message: expect.stringMatching(/actor_type.*NUL/s) });
    expect(await refusal({ subject: { subject_type: "mes\u0000sage" } })).toMatchObject({ status: 400 });
    expect(await refusal({ source_event_type: "x\u0000y" })).toMatchObject({ status: 400 });
    // The same event without the NUL is recorded as sent.
    const posted = await host.postEvent(messageEvent("nul-actor", "hi", { actor: { ...actor, actor_name: "Ada Lovelace" } }));
    expect(posted.status).toBe(202);
    expect((await host.admin("GET", `/v1/events/${posted.body.event_id}`)).body.actor_name).toBe("Ada Lovelace");
  });

  it("a runner's result type with a NUL never reads back from the ledger as a known type it was not", async () => {
    const posted = await host.postEvent(messageEvent("nul-forge", "forge"));
    const run = await host.waitForRun(posted.body.run_id!);
    const ledger = (await host.admin("GET", `/v1/runs/${run.run_id}/events`)).body.items as { type: string; data: any }[];
    const replay = await readSse(await fetch(`${host.url}/v1/runs/${run.run_id}/stream`, { headers: auth() }));
    const transcript = (await host.admin("GET", "/v1/conversations/transcript?conversation_id=nul-forge")).body.items as { role: string; content: string }[];
    const shown = transcript.filter((i) => i.role === "assistant").map((i) => i.content);
    // Every message.completed the ledger shows was applied (is in the transcript), and the ledger has one terminal entry.
    // Observed: the ledger and its SSE replay show "message.completed" {forged, never applied} and two run.completed.
    expect(ledger.filter((e) => e.type === "message.completed").map((e) => e.data.message.content)).toEqual(shown);
    expect(ledger.filter((e) => e.type === "run.completed" || e.type === "run.failed").length).toBe(1);
    expect(replay.frames.filter((f) => f.type === "run.completed" || f.type === "run.failed").length).toBe(1);
  });

  it("a runner's run.failed error with a NUL reads back in GET /v1/runs/{id} as the ledger has it", async () => {
    const posted = await host.postEvent(messageEvent("nul-fail", "fail"));
    const run = await host.waitForRun(posted.body.run_id!);
    const ledger = (await host.admin("GET", `/v1/runs/${run.run_id}/events`)).body.items as { type: string; data: any }[];
    const failed = ledger.filter((e) => e.type === "run.failed").at(-1)!;
    expect(run.status).toBe("failed");
    expect(run.error).toEqual({ code: failed.data.code, message: failed.data.error });
    expect(run.error?.code).not.toBe("upstream");
  });
});
