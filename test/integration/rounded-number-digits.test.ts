import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

/**
 * A whole number beyond ±(2^53 − 1) is refused wherever the host keeps a value as sent (README "HTTP API", "State"),
 * "send it as a string". The refusal named the number JSON parsing made of it, not the one sent: 9007199254740993
 * was refused as "the number 9007199254740992", a number the sender never wrote and cannot find in what they sent.
 * Each refusal now names the digits as written, in an event, an agent, a Host API call and a result alike.
 */
const SENT = "9007199254740993"; // 2^53 + 1
const PARSED = "9007199254740992"; // what JSON parsing reads it as

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "digits",
    async onRun({ body }, res) {
      const ctx = body.context;
      // A Python or Go runner writes the number's digits; JavaScript could not hold them, so the text is written out.
      const call = await fetch(`${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/api`, {
        method: "POST",
        headers: { authorization: `Bearer ${ctx.runtime.api.token}` },
        body: `{"action":"state.set","params":{"scope":"conversation","key":"k","value":{"id":${SENT}}}}`,
      });
      const answer = (await call.json()) as { error?: { message: string } };
      const line = (type: string, data: string) => `{"run_id":"${ctx.run_id}","type":"${type}","data":${data}}\n`;
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.write(line("state.updated", `{"scope":"conversation","key":"k","value":[${SENT}]}`));
      res.write(line("message.completed", JSON.stringify({ message: { role: "assistant", content: answer.error?.message ?? "accepted" } })));
      res.end(line("run.completed", `{"finish_reason":"stop"}`));
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "digits" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

const send = (method: string, path: string, text: string) =>
  fetch(`${host.url}${path}`, { method, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, body: text });

describe("a refused whole number beyond ±(2^53 − 1) is named as it was sent", () => {
  it("in an event's data", async () => {
    const res = await send("POST", "/v1/events", `{"event_type":"message.received","conversation_id":"digits-event","actor":{"actor_type":"user","actor_id":"u1"},"data":{"chat":{"id":${SENT}}}}`);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect([res.status, body.error.code]).toEqual([400, "invalid_request"]);
    expect(body.error.message).toContain(`data: the number ${SENT} is beyond`);
    expect(body.error.message).not.toContain(PARSED);
  });

  it("in an event's data, as written: with a fraction or an exponent too", async () => {
    // Whole all the same, and rounded all the same: the number named is the one sent, in the form it was sent.
    for (const written of [`${SENT}.0`, "9.007199254740993e15"]) {
      const res = await send("POST", "/v1/events", `{"event_type":"message.received","conversation_id":"digits-event","actor":{"actor_type":"user","actor_id":"u1"},"data":{"chat":{"id":${written}}}}`);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect([res.status, body.error.code]).toEqual([400, "invalid_request"]);
      expect(body.error.message).toContain(`data: the number ${written} is beyond`);
      expect(body.error.message).not.toContain(PARSED);
    }
  });

  it("in an agent's runner_config", async () => {
    const res = await send("POST", "/v1/admin/agents", `{"agent_id":"digits-agent","name":"d","runner_id":"${runner.runnerId()}","event_types":["message.received"],"scope":{"type":"conversation","id":"digits-agent"},"runner_config":{"guild_id":-${SENT}}}`);
    const body = (await res.json()) as { error: { message: string } };
    expect(res.status).toBe(400);
    expect(body.error.message).toContain(`runner_config: the number -${SENT} is beyond`);
    expect(body.error.message).not.toContain(PARSED);
  });

  it("in a Host API call's params and in a dropped result", async () => {
    const posted = await host.postEvent({ event_type: "message.received", conversation_id: "digits-run", actor: { actor_type: "user", actor_id: "u1" }, input: { text: "hi" } });
    const run = await host.waitForRun(posted.body.run_id!);
    // The run's message is the Host API's refusal, as the runner got it.
    expect(run.message?.content).toEqual(expect.stringContaining(`value: the number ${SENT} is beyond`));
    expect(run.message?.content).not.toContain(PARSED);
    const dropped = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ?", [run.run_id]);
    const reasons = dropped.map((row) => JSON.parse(row.data_json).reason as string);
    expect(reasons).toEqual([expect.stringContaining(`value: the number ${SENT} is beyond`)]);
    expect(reasons[0]).not.toContain(PARSED);
  });
});
