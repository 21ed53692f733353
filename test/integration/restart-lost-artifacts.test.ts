import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalHost } from "../../local/host";
import { adminCall, bindRunner } from "../../local/setup";
import { messageEvent, startHostOn, waitForRunOn } from "../support/host";
import { deferred } from "../support/host-api";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { useDataDir } from "../support/restart-host";

/**
 * README (Artifacts): refs announced after the run's last message "get an assistant item of their own, item_type:
 * "artifacts" with no content, also when the run is cut short". A run cut short by a restart of the host (ended
 * host.session_lost) made an artifact after its message: the transcript must still keep it, as it does for a run whose
 * stream broke off (answer-files.test.ts).
 */
const dataDir = useDataDir("agent-host-restart-art-");
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const never = deferred();
/** An artifact of an earlier run of the conversation, which a later run may name. */
let prior = "";
const start = () => startHostOn(dataDir.path, { RUN_WATCHDOG_INTERVAL_MS: "1000" });

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "restartart",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const inline = (name: string) => ({ artifact_type: "file", name, mime_type: "text/plain", content_base64: Buffer.from(name).toString("base64") });
      if (ctx.input.text === "edge") {
        w.send("artifact.created", inline("carried.txt"));
        w.send("message.completed", { message: { role: "assistant", content: "here" } });
        w.send("artifact.created", inline("trailing.txt"));
        // Dropped: invalid (naming an artifact the run could attach), refused (no such artifact), blank.
        w.send("artifact.created", { artifact_id: prior, artifact_type: 7 });
        w.send("artifact.created", { artifact_id: "art_none", artifact_type: "file" });
        w.send("message.completed", { message: { role: "assistant", content: "   " } });
        return never.promise;
      }
      w.send("message.completed", { message: { role: "assistant", content: "here is your report" } });
      w.send("artifact.created", { artifact_type: "file", name: "report.txt", mime_type: "text/plain", content_base64: Buffer.from("report").toString("base64") });
      if (ctx.input.text.startsWith("hold")) await never.promise;
      w.send("run.failed", { code: "runner.crashed", error: "stopped", retryable: false });
      res.end();
    },
  });
});
afterAll(async () => {
  never.resolve();
  await runner?.close();
});

const items = (host: LocalHost, runId: string) =>
  host.query<{ item_type: string; artifact_refs_json: string }>("SELECT item_type, artifact_refs_json FROM transcript WHERE run_id = ? AND role = 'assistant' ORDER BY seq", [runId]);

describe("a run lost with a restart after it made an artifact", () => {
  it("keeps the artifact in the transcript, as a run cut short any other way does", async () => {
    let host = await start();
    try {
      await bindRunner(host, { baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "restartart" });
      // The same run, cut short by its runner: the artifact gets an item of its own.
      const failed = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent("ra-failed", "fail"));
      expect(await waitForRunOn(host, failed.body.run_id)).toMatchObject({ status: "failed" });
      expect((await items(host, failed.body.run_id)).map((i) => [i.item_type, JSON.parse(i.artifact_refs_json).length])).toEqual([["message", 0], ["artifacts", 1]]);

      const held = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent("ra-held", "hold"));
      const until = Date.now() + 10_000;
      while ((await host.query("SELECT 1 FROM run_event WHERE run_id = ? AND type = 'artifact.created'", [held.body.run_id])).length === 0) {
        if (Date.now() > until) throw new Error("the artifact was never recorded");
        await new Promise((r) => setTimeout(r, 20));
      }
      await host.dispose();
      host = await start();
      expect(await waitForRunOn(host, held.body.run_id, 15_000)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
      const [artifact] = await host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact WHERE run_id = ?", [held.body.run_id]);
      expect(artifact).toBeDefined();
      const kept = await items(host, held.body.run_id);
      expect(kept.map((i) => [i.item_type, JSON.parse(i.artifact_refs_json).map((r: { artifact_id: string }) => r.artifact_id)])).toEqual([
        ["message", []],
        ["artifacts", [artifact.artifact_id]],
      ]);
    } finally {
      await host.dispose();
    }
  });

  it("leaves out what the host dropped and what a message of the run carried", async () => {
    let host = await start();
    const byName = async (runId: string) =>
      new Map((await host.query<{ artifact_id: string; name: string }>("SELECT artifact_id, name FROM artifact WHERE run_id = ?", [runId])).map((a) => [a.name, a.artifact_id]));
    try {
      const failed = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent("ra-edge", "fail"));
      await waitForRunOn(host, failed.body.run_id);
      prior = (await byName(failed.body.run_id)).get("report.txt")!;
      const held = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent("ra-edge", "edge"));
      const until = Date.now() + 10_000;
      // Every result recorded: two messages, and three drops warned about.
      while ((await host.query("SELECT 1 FROM run_event WHERE run_id = ? AND (type = 'message.completed' OR type = 'host.warning')", [held.body.run_id])).length < 5) {
        if (Date.now() > until) throw new Error("the results were never recorded");
        await new Promise((r) => setTimeout(r, 20));
      }
      await host.dispose();
      host = await start();
      expect(await waitForRunOn(host, held.body.run_id, 15_000)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
      const ids = await byName(held.body.run_id);
      const kept = await items(host, held.body.run_id);
      expect(kept.map((i) => [i.item_type, JSON.parse(i.artifact_refs_json).map((r: { artifact_id: string }) => r.artifact_id)])).toEqual([
        ["message", [ids.get("carried.txt")]],
        ["artifacts", [ids.get("trailing.txt")]],
      ]);
    } finally {
      await host.dispose();
    }
  });
});
