import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ADMIN_TOKEN, messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { stalledBody } from "../support/host-api";

/**
 * The host reads every body as sent. A body in a Content-Encoding that compresses (a client or proxy gzipping its
 * requests) is refused as such, with what to do, on every route that reads one: before, an event or admin body was
 * "not valid UTF-8" (the caller looks for a charset fault), and an upload stored the compressed bytes as the file.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const seen: Record<string, { status: number; body: any }> = {};

const json = (value: unknown) => JSON.stringify(value);

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "gzipped",
    runners: [{ name: "default", label: { en_US: "gzipped" }, permissions: { history: ["page"], artifacts: ["metadata", "read"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const api = ctx.runtime.api;
      const auth = { authorization: `Bearer ${api.token}` };
      const call = await fetch(`${api.base_url}/v1/runs/${ctx.run_id}/api`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json", "content-encoding": "gzip" },
        body: gzipSync(json({ action: "host.version", params: {} })),
      });
      seen.api = { status: call.status, body: await call.json() };
      // §8 checks the token before the payload: a compressed call with a wrong token is its 401, not the body's 400.
      const stranger = { authorization: "Bearer not-this-runs-token", "content-encoding": "gzip" };
      const strangerCall = await fetch(`${api.base_url}/v1/runs/${ctx.run_id}/api`, { method: "POST", headers: stranger, body: gzipSync(json({ action: "host.version", params: {} })) });
      const strangerUpload = await fetch(`${api.base_url}/v1/runs/${ctx.run_id}/artifacts?name=c.txt`, { method: "PUT", headers: stranger, body: gzipSync("bytes") });
      seen.stranger = { status: strangerCall.status, body: await strangerCall.json() };
      seen.strangerUpload = { status: strangerUpload.status, body: await strangerUpload.json() };
      const upload = await fetch(`${api.base_url}/v1/runs/${ctx.run_id}/artifacts?name=a.txt&mime_type=text/plain`, {
        method: "PUT",
        headers: { ...auth, "content-encoding": "gzip" },
        body: gzipSync("the file's own bytes"),
      });
      seen.upload = { status: upload.status, body: await upload.json() };
      // A coding that compresses nothing is a mislabel, read as sent.
      const plain = await fetch(`${api.base_url}/v1/runs/${ctx.run_id}/artifacts?name=b.txt&mime_type=text/plain`, {
        method: "PUT",
        headers: { ...auth, "content-encoding": "identity" },
        body: "the file's own bytes",
      });
      seen.plain = { status: plain.status, body: await plain.json() };
      return resultWriter(res, ctx.run_id).reply("ok");
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "gzipped" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

const post = (path: string, body: unknown, encoding: string) =>
  fetch(`${host.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json", "content-encoding": encoding },
    body: encoding === "gzip" ? gzipSync(json(body)) : json(body),
  });

it("an event or admin body sent gzipped is a 415 saying to send it uncompressed, and nothing is recorded", async () => {
  const event = await post("/v1/events", messageEvent("gz-conv", "hi", { event_id: "gz-1" }), "gzip");
  const agent = await post("/v1/admin/agents", { agent_id: "gz-agent", runner_id: runner.runnerId(), scope: { type: "conversation", id: "gz-conv" } }, "gzip");
  const answers = [
    { status: event.status, body: await event.json() },
    { status: agent.status, body: await agent.json() },
  ];
  for (const answer of answers) {
    expect(answer).toEqual({ status: 415, body: { error: { code: "unsupported_media_type", message: "a body in Content-Encoding gzip is not read: send it uncompressed" } } });
  }
  expect(await host.query("SELECT event_id FROM event_log WHERE event_id = 'gz-1'")).toEqual([]);
  expect((await host.admin("GET", "/v1/admin/agents/gz-agent")).status).toBe(404);
  // A coding that compresses nothing is read as sent.
  const mislabelled = await post("/v1/events", messageEvent("gz-conv", "hi", { event_id: "gz-2" }), "utf-8");
  expect(mislabelled.status).toBe(202);
  await host.waitForRun(((await mislabelled.json()) as { run_id: string }).run_id);
});

it("an event or admin body refused as gzipped is drained before the 415, so a client still sending reads it instead of a reset", async () => {
  // README "HTTP API": a body refused before it is read is drained (up to 4 MiB and 5 s) before the answer.
  for (const path of ["/v1/events", "/v1/admin/agents"]) {
    const answer = await stalledBody(`${host.url}${path}`, { method: "POST", token: ADMIN_TOKEN, declared: 512 * 1024, first: 64 * 1024, pauseMs: 300, headers: { "content-encoding": "gzip" } });
    expect({ path, ...answer }).toEqual({ path, answeredDuringPause: false, status: 415 });
  }
});

it("a Host API call or upload sent gzipped is a 400 invalid_argument saying so (§8 has no 415), and stores nothing", async () => {
  const started = await host.postEvent(messageEvent("gz-run", "go"));
  await host.waitForRun(started.body.run_id!);
  const refusal = { code: "invalid_argument", message: "a body in Content-Encoding gzip is not read: send it uncompressed" };
  expect(seen.api).toEqual({ status: 400, body: { ok: false, error: expect.objectContaining(refusal) } });
  expect(seen.upload).toEqual({ status: 400, body: { ok: false, error: expect.objectContaining(refusal) } });
  for (const answer of [seen.stranger, seen.strangerUpload]) expect(answer).toEqual({ status: 401, body: { ok: false, error: expect.objectContaining({ code: "unauthorized" }) } });
  expect(seen.plain.status).toBe(200);
  const stored = await host.query<{ name: string }>(`SELECT name FROM artifact WHERE run_id = '${started.body.run_id}' ORDER BY name`);
  expect(stored.map((row) => row.name)).toEqual(["b.txt"]);
});
