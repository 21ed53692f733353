import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README (HTTP API): "An event's data, metadata, actor.metadata and subject.data are kept and passed on as sent, so a
 * whole number in them beyond ±(2^53 − 1), which JSON parsing would round (a 64-bit id), is a 400". Two kinds of number
 * slipped through and were recorded and given to the runner altered, without a word:
 * - a whole number past 64 bits as a Python client writes it (2**70, a uuid4().int): state refuses these (README,
 *   State), events kept them rounded to a float (1.1805916207174113e+21);
 * - a number past the double range (1e400): parsed as Infinity, recorded and passed on as null.
 */
const BIG = "1180591620717411303424"; // 2**70 as Python's json.dumps writes it
const UUID_INT = "36294981088721334916236549718224779947"; // a uuid4().int

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "exactnums",
    runners: [{ name: "default", label: { en_US: "exactnums" }, capabilities: {}, permissions: {} }],
    async onRun({ body }, res) {
      resultWriter(res, body.context.run_id).reply("ok");
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "exactnums" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

/** The body as a Python or Go client sends it: the number's digits as written, not what JavaScript would print. */
const post = (eventId: string, field: string, literal: string) => {
  const bags: Record<string, string> = {
    data: `"data": {"n": ${literal}}`,
    metadata: `"metadata": {"n": ${literal}}`,
    "actor.metadata": `"actor": {"actor_type": "user", "actor_id": "u1", "metadata": {"n": ${literal}}}`,
    "subject.data": `"subject": {"subject_type": "doc", "subject_id": "d1", "data": {"n": [${literal}]}}`,
  };
  const actor = field === "actor.metadata" ? "" : `"actor": {"actor_type": "user", "actor_id": "u1"}, `;
  const body = `{"event_id": "${eventId}", "event_type": "message.received", "conversation_id": "exactnums", ${actor}"input": {"text": "hi"}, ${bags[field]}}`;
  return fetch(`${host.url}/v1/events`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, body });
};

describe("a number in an event's free-form bags that JSON parsing cannot keep", () => {
  for (const [name, literal] of [["2**70", BIG], ["a uuid int", UUID_INT], ["1e400", "1e400"], ["-1e999", "-1e999"]] as const) {
    for (const field of ["data", "metadata", "actor.metadata", "subject.data"]) {
      it(`${name} in ${field} is a 400 and nothing is recorded, never stored or passed on altered`, async () => {
        const eventId = `exact-${field.replace(".", "-")}-${literal.replace(/\W/g, "")}`;
        const res = await post(eventId, field, literal);
        const body = (await res.json()) as { error?: { code: string; message: string } };
        expect([res.status, body.error?.code]).toEqual([400, "invalid_request"]);
        expect(body.error?.message).toMatch(/send it as a string/);
        expect(await host.query("SELECT event_id FROM event_log WHERE event_id = ?", [eventId])).toEqual([]);
      });
    }
  }

  it("a float written as one (1.5e300) and a safe integer are kept as sent", async () => {
    const res = await post("exact-float", "data", "1.5e300");
    expect(res.status).toBe(202);
    const rows = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_id = 'exact-float'");
    expect(JSON.parse(rows[0].data_json)).toEqual({ n: 1.5e300 });
  });
});
