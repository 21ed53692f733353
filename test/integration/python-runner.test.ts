import { spawn, type ChildProcess } from "node:child_process";
import { createHmac } from "node:crypto";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../../local/build";
import { waitFor } from "../support/fake-platform";
import { messageEvent, readSse, startTestHost, type TestHost } from "../support/host";

// The Python example, run as its author would run it: python3 (on every machine of this project's kind, CI's too).
const SECRET = "python-runner-secret-0123456789";
const RUNNER_ID = "http:examples/python/default";
let host: TestHost;
let runner: { url: string; proc: ChildProcess; stderr: () => string };

async function startPythonRunner(): Promise<typeof runner> {
  const proc = spawn("python3", [join(ROOT, "examples/python-runner/runner.py"), "0"], { env: { ...process.env, RUNNER_SECRET: SECRET }, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  proc.stderr!.on("data", (chunk) => (stderr += chunk));
  const url = await new Promise<string>((resolve, reject) => {
    proc.once("error", reject);
    proc.once("exit", (code) => reject(new Error(`the Python runner exited (${code}): ${stderr}`)));
    createInterface({ input: proc.stdout! }).once("line", (line) => resolve(/http:\/\/\S+/.exec(line)?.[0] ?? line));
  });
  return { url, proc, stderr: () => stderr };
}

const agent = (id: string, conversation: string, config: Record<string, unknown> = {}) => ({
  agent_id: id, name: id, runner_id: RUNNER_ID, event_types: ["message.received"], scope: { type: "conversation", id: conversation }, runner_config: config,
});

async function ledger(runId: string) {
  const res = await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
  return readSse(res);
}

beforeAll(async () => {
  runner = await startPythonRunner();
  host = await startTestHost({ captureLogs: true });
  await host.bind({ baseUrl: runner.url, secret: SECRET, runnerId: RUNNER_ID, agentId: "py", scope: { type: "conversation", id: "py-a" } });
});
afterAll(async () => {
  await host?.dispose();
  runner?.proc.kill();
});

describe("the Python example runner (standard library only) against the real host", () => {
  it("verifies the signed request, reads through the Host API, and streams deltas, a message, state and an inline artifact", async () => {
    const first = await host.waitForRun((await host.postEvent(messageEvent("py-a", "hello"))).body.run_id!);
    expect(first).toMatchObject({ status: "completed", finish_reason: "stop", message: { role: "assistant", content: 'Turn 1: you said "hello"' } });
    const ev = await host.postEvent(messageEvent("py-a", "again"));
    const second = await host.waitForRun(ev.body.run_id!);
    // The turn count came back through state.get, the earlier message through history.page.
    expect(second.message?.content).toBe('Turn 2: you said "again", and before that "hello"');
    expect(host.decisions(ev.body.run_id!).map((d) => [d.action, d.outcome])).toEqual(
      ["event.get", "history.page", "state.get", "state.set", "steering.pull"].map((a) => [a, "allowed"]),
    );

    const { frames, end } = await ledger(ev.body.run_id!);
    expect(end).toBe("completed");
    expect(frames.every((f) => f.origin === "runner")).toBe(true);
    const types = frames.map((f) => f.type);
    expect(types.slice(-4)).toEqual(["message.completed", "state.updated", "artifact.created", "run.completed"]);
    expect(frames.filter((f) => f.type === "message.delta").map((f) => f.data.chunk.content).join("")).toBe(second.message?.content);
    expect(frames.find((f) => f.type === "state.updated")?.data).toEqual({ scope: "conversation", key: "last_reply", value: second.message?.content });
    // The inline artifact was stored: its ledger entry names it by id, and the answer's transcript carries it.
    const note = frames.find((f) => f.type === "artifact.created")!.data;
    expect(note).toMatchObject({ artifact_type: "file", name: "note.txt", mime_type: "text/plain", artifact_id: expect.stringMatching(/^art_/) });
    const transcript = await host.admin<any>("GET", "/v1/conversations/transcript?conversation_id=py-a&include_artifacts=true&limit=1");
    expect(transcript.body.items[0]).toMatchObject({ item_type: "artifacts", artifact_refs: [{ artifact_id: note.artifact_id, name: "note.txt" }] });
  });

  it("answers a message sent while it thinks inside the same run, pulled at its turn boundary", async () => {
    expect((await host.admin("POST", "/v1/admin/agents", agent("py-steer", "py-steer", { turn_delay_ms: 1500 }))).status).toBe(201);
    const first = await host.postEvent(messageEvent("py-steer", "first"));
    const second = await host.postEvent(messageEvent("py-steer", "second"));
    expect(second.body).toMatchObject({ disposition: "steered", run_id: first.body.run_id });
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("completed");
    const { frames } = await ledger(first.body.run_id!);
    expect(frames.filter((f) => f.type === "message.completed").map((f) => f.data.message.content)).toEqual([
      'Turn 1: you said "first"',
      'Turn 2: you said "second", and before that "first"',
    ]);
    const events = await host.admin<any>("GET", "/v1/conversations/events?conversation_id=py-steer");
    expect(events.body.items.find((e: any) => e.event_type === "steering.injected")?.metadata.source_event_id).toBe(second.body.event_id);
  });

  it("stops when its run is cancelled: the host closing the request is all it hears", async () => {
    expect((await host.admin("POST", "/v1/admin/agents", agent("py-cancel", "py-cancel", { turn_delay_ms: 60_000 }))).status).toBe(201);
    const runId = (await host.postEvent(messageEvent("py-cancel", "take your time"))).body.run_id!;
    // Its last call before it waits: the runner is thinking with the request open.
    await waitFor(() => host.decisions(runId).some((d) => d.action === "state.set"), 15_000, "the runner to begin its turn");
    expect((await host.admin("POST", `/v1/runs/${runId}/cancel`)).status).toBe(202);
    expect((await host.waitForRun(runId)).status).toBe("cancelled");
    await waitFor(() => runner.stderr().includes(`run ${runId}: the host closed the request; stopped`), 5_000, "the runner to stop");
  });

  it("refuses a run request not signed with its secret, and the host fails that run runner.http_error", async () => {
    const body = JSON.stringify({ runner_id: RUNNER_ID, runner_name: "default", context: {} });
    const post = (headers: Record<string, string>) => fetch(`${runner.url}/runners/default/run`, { method: "POST", headers, body });
    const signed = (ts: number) => ({ "x-agent-timestamp": String(ts), "x-agent-signature": `v1=${createHmac("sha256", SECRET).update(`${ts}.${body}`).digest("hex")}` });
    const unsigned = await post({});
    expect(unsigned.status).toBe(401);
    expect(await unsigned.json()).toEqual({ error: { code: "unauthorized", message: "missing or stale X-Agent-Timestamp" } });
    expect((await post(signed(Math.floor(Date.now() / 1000) - 600))).status).toBe(401);
    // Signed as the host signs: past the signature, a context without a run is the caller's error.
    expect((await post(signed(Math.floor(Date.now() / 1000)))).status).toBe(400);

    const services = await host.admin<any>("GET", "/v1/admin/runner-services");
    const serviceId = services.body.items.find((s: any) => s.name === "python").service_id;
    const resecret = (secret: string) => host.admin("PUT", `/v1/admin/runner-services/${serviceId}`, { base_url: runner.url, secret });
    expect((await resecret("not-the-runner-secret-0123")).status).toBe(200);
    const run = await host.waitForRun((await host.postEvent(messageEvent("py-a", "forged?"))).body.run_id!);
    expect(run).toMatchObject({ status: "failed", error: { code: "runner.http_error", message: 'runner answered HTTP 401: {"error": {"code": "unauthorized", "message": "bad X-Agent-Signature"}}' } });
    expect(runner.stderr()).toContain("refused /runners/default/run: bad X-Agent-Signature");
    expect((await resecret(SECRET)).status).toBe(200);
  });
});
