import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { runLedger } from "../support/scripted-runner";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * A run accepts at most RUN_MAX_ARTIFACTS `artifact.created` results (README, Artifacts): each one past the cap is
 * dropped like any refused result (kept in the ledger as sent, a `result.artifact_limit` warning naming its
 * `ledger_seq`, an audit record), nothing of it is stored or referenced, and the run goes on to complete.
 */
const CAP = 3;
const SENT = 5;

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

const inline = (i: number) => ({ artifact_type: "file", name: `a${i}.txt`, mime_type: "text/plain", content_base64: Buffer.from(`artifact ${i}`).toString("base64") });

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "artifact-limit",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      if (ctx.input.text === "trailing") {
        // Announced after the run's last message: the run's closing item of artifacts carries only the kept ones.
        w.send("message.completed", { message: { role: "assistant", content: "files follow" } });
        for (let i = 0; i < SENT; i++) w.send("artifact.created", inline(i));
        w.send("run.completed", { finish_reason: "stop" });
        return void res.end();
      }
      for (let i = 0; i < SENT; i++) w.send("artifact.created", inline(i));
      w.reply("here are your files");
    },
  });
  host = await startTestHost({ vars: { RUN_MAX_ARTIFACTS: String(CAP) } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "artifact-limit" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

async function runOf(conv: string, text: string) {
  const posted = await host.postEvent(messageEvent(conv, text));
  const run = await host.waitForRun(posted.body.run_id!);
  const rows = await host.query<{ artifact_id: string; name: string; r2_key: string }>("SELECT artifact_id, name, r2_key FROM artifact WHERE run_id = ? ORDER BY name", [run.run_id]);
  const keys = new Set(await host.r2Keys("artifacts/"));
  const named = new Set((await host.query<{ r2_key: string }>("SELECT r2_key FROM artifact")).map((r) => r.r2_key));
  const ledger = (await runLedger(host, run.run_id)) as { seq: number; type: string; origin: string; data: any }[];
  const audits = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ?", [run.run_id]);
  const items = await host.query<{ item_type: string; content: string | null; artifact_refs_json: string | null }>(
    "SELECT item_type, content, artifact_refs_json FROM transcript WHERE run_id = ? AND role = 'assistant' ORDER BY seq",
    [run.run_id],
  );
  return { run, rows, keys, unnamedBlobs: [...keys].filter((k) => !named.has(k)), ledger, audits: audits.map((a) => JSON.parse(a.data_json)), items: items.map((i) => ({ ...i, refs: JSON.parse(i.artifact_refs_json ?? "[]") as { artifact_id: string }[] })) };
}

function expectDroppedPastCap({ rows, keys, unnamedBlobs, ledger, audits }: Awaited<ReturnType<typeof runOf>>) {
  // Exactly CAP stored: rows and blobs, the first ones announced; no blob put for a dropped one.
  expect(rows.map((r) => r.name)).toEqual(["a0.txt", "a1.txt", "a2.txt"]);
  for (const r of rows) expect(keys.has(r.r2_key)).toBe(true);
  expect(unnamedBlobs).toEqual([]);
  const announced = ledger.filter((e) => e.origin === "runner" && e.type === "artifact.created");
  expect(announced).toHaveLength(SENT);
  const over = announced.slice(CAP);
  // Kept as sent, with no stored id; each named by exactly one artifact_limit warning and one audit record.
  for (const e of over) {
    expect(e.data).toHaveProperty("content_base64");
    expect(e.data).not.toHaveProperty("artifact_id");
    const warnings = ledger.filter((w) => w.type === "host.warning" && w.data.ledger_seq === e.seq);
    expect(warnings).toEqual([expect.objectContaining({ origin: "host", data: expect.objectContaining({ code: "result.artifact_limit", ledger_seq: e.seq }) })]);
  }
  expect(ledger.filter((w) => w.type === "host.warning" && w.data.code === "result.artifact_limit")).toHaveLength(SENT - CAP);
  expect(audits.map((a) => a.ledger_seq).sort()).toEqual(over.map((e) => e.seq).sort());
  for (const a of audits) expect(a).toMatchObject({ result_type: "artifact.created", limit: CAP });
  // The kept ones are not warned about.
  for (const e of announced.slice(0, CAP)) expect(ledger.some((w) => w.type === "host.warning" && w.data.ledger_seq === e.seq)).toBe(false);
}

describe("RUN_MAX_ARTIFACTS", () => {
  it("stores the first artifacts up to the cap, drops the rest with a warning, and the run completes with its message", async () => {
    const result = await runOf("artifact-limit", "over");
    expect(result.run.status).toBe("completed");
    expect(result.run.message).toMatchObject({ role: "assistant", content: "here are your files" });
    expectDroppedPastCap(result);
    // The reply's item refs only the kept artifacts.
    expect(result.items).toHaveLength(1);
    expect(result.items[0]).toMatchObject({ item_type: "message", content: "here are your files" });
    expect(result.items[0].refs.map((r) => r.artifact_id).sort()).toEqual(result.rows.map((r) => r.artifact_id).sort());
  });

  it("keeps only the artifacts within the cap in the run's closing item of artifacts", async () => {
    const result = await runOf("artifact-limit-trailing", "trailing");
    expect(result.run.status).toBe("completed");
    expectDroppedPastCap(result);
    expect(result.items.map((i) => i.item_type)).toEqual(["message", "artifacts"]);
    expect(result.items[0].refs).toEqual([]);
    expect(result.items[1].refs.map((r) => r.artifact_id).sort()).toEqual(result.rows.map((r) => r.artifact_id).sort());
  });
});
