/**
 * A result the host drops (§7: its strict payload is invalid) stays in the ledger as sent, and is replayed on
 * GET /v1/runs/{id}/stream like any entry. Its `host.warning` names it by its ledger seq (the frame's id), so a
 * follower can tell it was not applied even when the runner numbers nothing (`sequence` is optional). So is a valid
 * `artifact.created` naming an artifact the run may not attach, refused only once looked up in the store.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, messageEvent, readSse, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const line = (o: unknown) => `${JSON.stringify(o)}\n`;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "dropped-visible",
    async onRun({ body }, res) {
      const id = body.context.run_id;
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      if (body.context.input.text === "refused ref") {
        res.write(line({ run_id: id, type: "artifact.created", data: { artifact_type: "file", artifact_id: "art_never_stored" }, sequence: 1 }));
        res.write(line({ run_id: id, type: "message.completed", data: { message: { role: "assistant", content: "here is your file" } }, sequence: 2 }));
        return void res.end(line({ run_id: id, type: "run.completed", data: { finish_reason: "stop" }, sequence: 3 }));
      }
      // Unnumbered results (sequence is optional). The first delta has a top-level extra key: the host drops it.
      res.write(line({ run_id: id, type: "message.delta", data: { chunk: { role: "assistant", content: "DROPPED " }, index: 0 } }));
      res.write(line({ run_id: id, type: "message.delta", data: { chunk: { role: "assistant", content: "kept" } } }));
      res.write(line({ run_id: id, type: "message.completed", data: { message: { role: "assistant", content: "kept" } } }));
      res.end(line({ run_id: id, type: "run.completed", data: { finish_reason: "stop" } }));
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "dropped-visible" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("a dropped, unnumbered result in the run's stream and ledger", () => {
  it("can be told apart from the results the host applied", async () => {
    const ev = await host.postEvent(messageEvent("dropped-visible", "hi"));
    const run = await host.waitForRun(ev.body.run_id!);
    expect(run.status).toBe("completed");
    const { frames } = await readSse(await fetch(`${host.url}/v1/runs/${ev.body.run_id}/stream`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }));
    const warning = frames.find((f) => f.type === "host.warning" && f.data.code === "result.invalid_payload");
    expect(warning).toBeDefined();
    const droppedFrame = frames.find((f) => f.type === "message.delta" && f.data.chunk?.content === "DROPPED ")!;
    expect(droppedFrame.seq).toBeGreaterThan(0);
    expect(warning!.data).toMatchObject({ sequence: null, ledger_seq: droppedFrame.seq });
    const [audit] = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ?", [ev.body.run_id!]);
    expect(JSON.parse(audit.data_json)).toMatchObject({ result_type: "message.delta", ledger_seq: droppedFrame.seq });
  });

  it("an artifact.created naming an artifact the run may not attach is named by ledger_seq in its warning and audit", async () => {
    const ev = await host.postEvent(messageEvent("refused-ref", "refused ref"));
    expect((await host.waitForRun(ev.body.run_id!)).status).toBe("completed");
    const ledger = (await host.admin("GET", `/v1/runs/${ev.body.run_id}/events?limit=1000`)).body.items as { seq: number; type: string; data: any }[];
    const announced = ledger.find((e) => e.type === "artifact.created")!;
    expect(announced).toBeDefined();
    const [audit] = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ?", [ev.body.run_id!]);
    expect(JSON.parse(audit.data_json)).toMatchObject({ result_type: "artifact.created", artifact_id: "art_never_stored", ledger_seq: announced.seq });
    expect(ledger.filter((e) => e.type === "host.warning" && e.data.ledger_seq === announced.seq)).toHaveLength(1);
  });
});
