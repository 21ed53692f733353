import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

/**
 * README: "What the host could not give back as it was sent is refused, never stored altered"; a whole number beyond
 * ±(2^53 − 1) (a 64-bit id, which JSON parsing rounds) is refused in state values, event data and metadata and
 * runner_config. An inline artifact.created's `metadata` is stored with the artifact (artifact.metadata gives it back):
 * a 64-bit id in it must not be stored rounded to a neighbour. Either kept exactly or dropped and audited.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const IDS: Record<string, string> = {
  "64-bit": "1234567890123456789", // JSON.parse reads it as 1234567890123456800
  "past 64 bits": "1180591620717411303424", // 2**70, a Python int
};

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "exact-ints",
    async onRun({ body }, res) {
      const ctx = body.context;
      const ID = IDS[ctx.input.text];
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      // Written as a Python runner's json.dumps writes an int: all its digits.
      res.write(`{"run_id":"${ctx.run_id}","type":"artifact.created","sequence":1,"data":{"artifact_type":"file","name":"a.txt","mime_type":"text/plain","content_base64":"aGk=","metadata":{"discord_message_id":${ID}}}}\n`);
      res.write(`${JSON.stringify({ run_id: ctx.run_id, type: "message.completed", sequence: 2, data: { message: { role: "assistant", content: "a file" } } })}\n`);
      res.end(`${JSON.stringify({ run_id: ctx.run_id, type: "run.completed", sequence: 3, data: { finish_reason: "stop" } })}\n`);
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "exact-ints" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("an inline artifact.created whose metadata holds a whole number beyond 2^53", () => {
  for (const [what, ID] of Object.entries(IDS)) it(`(${what}) is never stored with that number rounded`, async () => {
    const ev = await host.postEvent(messageEvent(`exact-ints-${what}`, what));
    const run = await host.waitForRun(ev.body.run_id!);
    expect(run.status).toBe("completed");
    const stored = await host.query<{ metadata_json: string }>("SELECT metadata_json FROM artifact WHERE run_id = ?", [ev.body.run_id!]);
    const dropped = await host.query("SELECT 1 FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ?", [ev.body.run_id!]);
    // Kept exactly, or refused (dropped and audited): never a neighbour of the id.
    for (const row of stored) expect(row.metadata_json).toContain(ID);
    expect(stored.length + dropped.length).toBe(1);
  });
});
