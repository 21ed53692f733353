/**
 * README: a result the host drops is recorded as `runner.result_dropped`, "the entry stays in the ledger as sent,
 * and its `host.warning` and audit record name it by `ledger_seq` (its SSE frame id)", so a follower of the run's
 * stream or ledger can tell it was not applied. An `artifact.created {artifact_id}` naming an artifact the run may
 * not attach (unknown, another conversation's) is dropped and audited as `runner.result_dropped` too, but neither a
 * `host.warning` nor the audit names its ledger entry: a follower sees an artifact announced that was never attached.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const line = (o: unknown) => `${JSON.stringify(o)}\n`;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "refused-ref",
    async onRun({ body }, res) {
      const id = body.context.run_id;
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.write(line({ run_id: id, type: "artifact.created", data: { artifact_type: "file", artifact_id: "art_never_stored" }, sequence: 1 }));
      res.write(line({ run_id: id, type: "message.completed", data: { message: { role: "assistant", content: "here is your file" } }, sequence: 2 }));
      res.end(line({ run_id: id, type: "run.completed", data: { finish_reason: "stop" }, sequence: 3 }));
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "refused-ref" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("an artifact.created naming an artifact the run may not attach", () => {
  it("is named by ledger_seq in its host.warning and its runner.result_dropped audit, like any dropped result", async () => {
    const ev = await host.postEvent(messageEvent("refused-ref", "hi"));
    const run = await host.waitForRun(ev.body.run_id!);
    expect(run.status).toBe("completed");
    const ledger = (await host.admin("GET", `/v1/runs/${ev.body.run_id}/events?limit=1000`)).body.items as { seq: number; type: string; data: any }[];
    const announced = ledger.find((e) => e.type === "artifact.created")!;
    expect(announced).toBeDefined();
    const [audit] = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ?", [ev.body.run_id!]);
    expect(JSON.parse(audit.data_json)).toMatchObject({ result_type: "artifact.created", artifact_id: "art_never_stored" });
    // What the README promises for a dropped result: both name the ledger entry.
    expect(JSON.parse(audit.data_json).ledger_seq).toBe(announced.seq);
    expect(ledger.filter((e) => e.type === "host.warning" && e.data.ledger_seq === announced.seq)).toHaveLength(1);
  });
});
