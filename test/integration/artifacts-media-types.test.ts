import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * Media types are case-insensitive (RFC 2045/6838): `Image/PNG` is an image for the runner's context and for
 * delivery. An upload's name is percent-decoded strictly: one that is not UTF-8 is refused, never stored as its
 * escape text.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  runner = await startScriptedRunner({
    name: "media-types",
    runners: [{ name: "default", label: { en_US: "x" }, capabilities: {}, permissions: { history: ["page"], artifacts: ["metadata", "read"] } }],
  });
  host = await startTestHost();
  await runner.register(host);
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "media-types" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

const PNG = Buffer.concat([Buffer.from("89504e470d0a1a0a", "hex"), Buffer.alloc(16, 7)]).toString("base64");

describe("artifact media types and upload names", () => {
  it("a media type is case-insensitive (RFC 2045/6838): Image/PNG is an image, as image/png is", async () => {
    const posted = await host.postEvent(
      messageEvent("rv-mime", "look", { input: { text: "look", attachments: [{ content_base64: PNG, name: "a.png", mime_type: "image/png" }, { content_base64: PNG, name: "b.png", mime_type: "Image/PNG" }] } }),
    );
    expect(posted.status).toBe(202);
    const run = await host.waitForRun(posted.body.run_id!);
    expect(run.status).toBe("completed");
    const ctx = runner.calls.find((c) => c.body.context.run_id === posted.body.run_id)!.body.context;
    expect(ctx.input.attachments.map((a: any) => a.artifact_type)).toEqual(["image", "image"]);
    expect(ctx.input.contents.map((e: any) => e.type)).toEqual(["text", "image", "image"]);
  });

  it("an upload whose name is not UTF-8 percent-encoding is refused, not stored with a name other than the one sent", async () => {
    const { result } = await runner.run(host, "rv-name-bytes", async (_api, ctx) => {
      const res = await fetch(`${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/artifacts?name=%E9t%E9.txt`, { method: "PUT", headers: { authorization: `Bearer ${ctx.runtime.api.token}` }, body: "x" });
      return { status: res.status, body: await res.json() };
    });
    // Hono's query reader keeps a value it cannot decode as its escape text: the upload would be stored as "%E9t%E9.txt".
    expect([result.status, result.body.error?.code]).toEqual([400, "invalid_argument"]);
    // A name in UTF-8 is taken as sent.
    const { result: ok } = await runner.run(host, "rv-name-utf8", async (_api, ctx) => {
      const res = await fetch(`${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/artifacts?name=${encodeURIComponent("été+1 & 2.txt")}`, { method: "PUT", headers: { authorization: `Bearer ${ctx.runtime.api.token}` }, body: "x" });
      return { status: res.status, body: await res.json() };
    });
    expect([ok.status, ok.body.data?.name]).toEqual([200, "été+1 & 2.txt"]);
  });
});
