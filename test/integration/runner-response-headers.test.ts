import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { BROKEN_CHUNKED_BODY, listenAnsweringRaw, listenLoopback, type LoopbackServer } from "../support/http-server";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * A runner (or its manifest) answering with headers over the runtime's 128 KiB is refused by fetch with an opaque
 * "internal error; reference = …", as a host name that does not resolve is: the run fails `runner.unreachable`
 * naming those known causes rather than the bare reference, and a registration's 502 does too (README, Writing a runner).
 * A body whose chunked framing is no HTTP fails as opaquely when it is read: said the same way.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let bigManifest: LoopbackServer;
let brokenManifest: LoopbackServer;

/** Headers of about `kib` KiB in all. */
const filler = (kib: number) => Object.fromEntries(Array.from({ length: kib }, (_, i) => [`x-filler-${i}`, "v".repeat(1000)]));

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "big-headers",
    async onRun({ body }, res) {
      const ctx = body.context;
      if (ctx.input.text === "broken body") return void res.socket?.end(BROKEN_CHUNKED_BODY);
      if (ctx.input.text === "huge headers") for (const [name, value] of Object.entries(filler(200))) res.setHeader(name, value);
      resultWriter(res, ctx.run_id).reply(`echo: ${ctx.input.text}`);
    },
  });
  bigManifest = await listenLoopback((_req, res) => {
    res.writeHead(200, { "content-type": "application/json", ...filler(200) });
    res.end(JSON.stringify({ protocol: "agent-runner/v1", author: "tests", name: "big-manifest-headers", version: "1", runners: [{ name: "default", label: { en_US: "b" } }] }));
  });
  brokenManifest = await listenAnsweringRaw(BROKEN_CHUNKED_BODY);
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "big-headers" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await bigManifest?.close();
  await brokenManifest?.close();
});

describe("a runner answering with oversized headers", () => {
  it("fails its own run runner.unreachable, naming the known causes, and the conversation goes on", async () => {
    const posted = await host.postEvent(messageEvent("big-headers", "huge headers"));
    const run = await host.waitForRun(posted.body.run_id!);
    expect(run.status).toBe("failed");
    expect(run.error?.code).toBe("runner.unreachable");
    expect(run.error?.message).toMatch(/^runner request failed: the runtime's opaque internal error \(runtime reference [^;\s]+; its known causes: .*headers over 128 KiB in all, or a body whose chunked framing is broken\)$/);
    const next = await host.postEvent(messageEvent("big-headers", "plain"));
    expect(await host.waitForRun(next.body.run_id!)).toMatchObject({ status: "completed", message: { content: "echo: plain" } });
    const items = await host.query<{ role: string; content: string }>("SELECT role, content FROM transcript WHERE conversation_id = 'big-headers' ORDER BY seq");
    expect(items).toEqual([
      { role: "user", content: "huge headers" },
      { role: "user", content: "plain" },
      { role: "assistant", content: "echo: plain" },
    ]);
  });

  it("fails its own run runner.stream_closed naming the known causes when its result stream's framing is no HTTP", async () => {
    const posted = await host.postEvent(messageEvent("broken-body", "broken body"));
    const run = await host.waitForRun(posted.body.run_id!);
    expect([run.status, run.error?.code]).toEqual(["failed", "runner.stream_closed"]);
    expect(run.error?.message).toMatch(/^result stream broke: the runtime's opaque internal error \(runtime reference [^;\s]+; its known causes: .*\)$/);
  });

  it("refuses a manifest answered with them with a 502 that says so, registering nothing", async () => {
    const refused = await host.admin("POST", "/v1/admin/runner-services", { base_url: bigManifest.url });
    expect([refused.status, refused.body.error.code]).toEqual([502, "bad_gateway"]);
    expect(refused.body.error.message).toMatch(new RegExp(`^could not fetch ${bigManifest.url}/manifest: the runtime's opaque internal error \\(runtime reference [^;\\s]+; its known causes: .*headers over 128 KiB`));
    expect(await host.query("SELECT runner_id FROM runner WHERE runner_id LIKE 'http:tests/big-manifest-headers/%'")).toEqual([]);
  });

  it("refuses a manifest whose body's framing is no HTTP with a 502 naming the known causes", async () => {
    const refused = await host.admin("POST", "/v1/admin/runner-services", { base_url: brokenManifest.url });
    expect([refused.status, refused.body.error.code]).toEqual([502, "bad_gateway"]);
    expect(refused.body.error.message).toMatch(new RegExp(`^could not read ${brokenManifest.url}/manifest: the runtime's opaque internal error \\(runtime reference [^;\\s]+; its known causes: .*\\)$`));
  });
});
