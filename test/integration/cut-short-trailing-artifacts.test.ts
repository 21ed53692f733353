/**
 * Verification (README, Artifacts: the item of trailing artifacts is kept "also when the run is cut short"): a run
 * cancelled by an operator, and one stopped by its deadline, after announcing an artifact past its last message.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const never = deferred<void>();

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "cut-art",
    async onRun({ body }, res) {
      const w = resultWriter(res, body.context.run_id);
      w.send("message.completed", { message: { role: "assistant", content: "here" } });
      w.send("artifact.created", { artifact_type: "file", name: "r.txt", mime_type: "text/plain", content_base64: Buffer.from("r").toString("base64") });
      await never.promise;
    },
  });
  host = await startTestHost({ vars: { RUN_DEADLINE_MS: "3000" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
  await putAgent(host, { agent_id: "cut-art", runner_id: runner.runnerId() });
});
afterAll(async () => {
  never.resolve();
  await host?.dispose();
  await runner?.close();
});

async function cutShort(conversation: string, cut: (runId: string) => Promise<void>, status: string) {
  const runId = (await host.postEvent(messageEvent(conversation, "go"))).body.run_id!;
  await expect.poll(async () => (await host.query("SELECT 1 FROM run_event WHERE run_id = ? AND type = 'artifact.created'", [runId])).length, { timeout: 5000 }).toBe(1);
  await cut(runId);
  expect((await host.waitForRun(runId, 10_000)).status).toBe(status);
  const [art] = await host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact WHERE run_id = ?", [runId]);
  const items = await host.query<{ item_type: string; artifact_refs_json: string }>("SELECT item_type, artifact_refs_json FROM transcript WHERE run_id = ? AND role = 'assistant' ORDER BY seq", [runId]);
  expect(items.map((i) => [i.item_type, JSON.parse(i.artifact_refs_json ?? "[]").map((r: { artifact_id: string }) => r.artifact_id)])).toEqual([
    ["message", []],
    ["artifacts", [art.artifact_id]],
  ]);
}

describe("a run cut short after an artifact past its last message", () => {
  it("cancelled: keeps the item", () => cutShort("cut-cancel", async (id) => void expect((await host.admin("POST", `/v1/runs/${id}/cancel`)).status).toBe(202), "cancelled"));
  it("deadline: keeps the item", () => cutShort("cut-deadline", async () => {}, "timeout"), 15_000);
});
