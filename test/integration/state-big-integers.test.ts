import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

/**
 * README: what the host could not give back as it was sent is refused, never stored altered. A runner in Python
 * writes its ints with every digit (`json.dumps(2**70)`, a 128-bit `uuid.int`), and JSON parsing rounds one past
 * 64 bits to a float that looks like any other (1.1805916207174113e+21): state must refuse it, in a `state.set` and
 * in a `state.updated` result alike, while a float written as one (1.5e300) is kept.
 */
const BIG = "1180591620717411303424"; // 2**70 as Python writes it
const UUID_INT = "36294981088721334916236549718224779947"; // a uuid4().int
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const answers: Record<string, { status: number; body: any }> = {};

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "bigints",
    async onRun({ body }, res) {
      const ctx = body.context;
      const { base_url: baseUrl, token } = ctx.runtime.api;
      // The request text as a Python runner sends it: the int's digits, not a rounded double.
      const set = async (value: string) => {
        const r = await fetch(`${baseUrl}/v1/runs/${ctx.run_id}/api`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: `{"action": "state.set", "params": {"scope": "conversation", "key": "set", "value": {"id": ${value}}}}`,
        });
        return { status: r.status, body: await r.json() };
      };
      answers.big = await set(BIG);
      answers.uuid = await set(UUID_INT);
      answers.float = await set("1.5e300");
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      const line = (seq: number, type: string, data: string) => res.write(`{"run_id": "${ctx.run_id}", "type": "${type}", "sequence": ${seq}, "data": ${data}}\n`);
      line(1, "state.updated", `{"scope": "conversation", "key": "emitted", "value": [${BIG}]}`);
      line(2, "state.updated", `{"scope": "conversation", "key": "float", "value": [1.5e300]}`);
      // Loose telemetry, kept as sent: a tool's 64-bit id in it too.
      line(3, "tool.call.completed", `{"tool_call_id": "t1", "tool_name": "lookup", "result": {"id": ${UUID_INT}, "small": 7}}`);
      line(4, "message.completed", `{"message": {"role": "assistant", "content": "ok"}}`);
      line(5, "run.completed", `{"finish_reason": "stop"}`);
      res.end();
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "bigints" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("a whole number past 64 bits in state", () => {
  it("is refused by state.set and dropped from state.updated, never stored rounded; a float is kept", async () => {
    const posted = await host.postEvent(messageEvent("bigints", "go"));
    const run = await host.waitForRun(posted.body.run_id!);
    expect(run.status).toBe("completed");
    for (const digits of [BIG, UUID_INT]) {
      const answer = digits === BIG ? answers.big : answers.uuid;
      expect([answer.status, answer.body.error?.code]).toEqual([400, "invalid_argument"]);
      // The digits as sent, not the rounded number.
      expect(answer.body.error.message).toContain(digits);
    }
    expect(answers.float.status).toBe(200);
    const stored = await host.query<{ key: string; value_json: string }>("SELECT key, value_json FROM runner_state WHERE key IN ('set', 'emitted', 'float') ORDER BY key");
    expect(stored.map((r) => [r.key, JSON.parse(r.value_json)])).toEqual([
      ["float", [1.5e300]],
      ["set", { id: 1.5e300 }],
    ]);
    const dropped = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ?", [run.run_id]);
    expect(dropped.map((r) => JSON.parse(r.data_json))).toEqual([expect.objectContaining({ result_type: "state.updated", reason: expect.stringContaining(BIG) })]);
    // README: a dropped result "stays in the ledger as sent", loose telemetry too: every digit, not a rounded float.
    const ledger = await fetch(`${host.url}/v1/runs/${run.run_id}/events`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }).then((r) => r.text());
    expect(ledger).toContain(`"data":{"scope":"conversation","key":"emitted","value":[${BIG}]}`);
    expect(ledger).toContain(`"result":{"id":${UUID_INT},"small":7}`);
    const stream = await fetch(`${host.url}/v1/runs/${run.run_id}/stream`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }).then((r) => r.text());
    expect(stream).toContain(`"value":[${BIG}]`);
    expect(stream).toContain(`"id":${UUID_INT}`);
  });
});
