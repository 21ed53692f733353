import { afterAll, beforeAll, expect, it } from "vitest";
import { uploadArtifact } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * PROTOCOL §8: `artifact.upload` is `PUT {host}/v1/runs/{run_id}/artifacts?name=&mime_type=&artifact_type=`, every
 * option optional. A query option given with no value (the spec's own template; what Python's httpx sends for a
 * parameter left None) is an option left unset, as README says a null Host API param is: not a 400.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const out: Record<string, any> = {};

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "upq",
    runners: [{ name: "default", label: { en_US: "upq" }, permissions: { artifacts: ["metadata", "read"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      out.template = await uploadArtifact(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, new TextEncoder().encode("bytes"), { name: "", mime_type: "", artifact_type: "" });
      out.named = await uploadArtifact(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, new TextEncoder().encode("bytes"), { name: "report.txt", mime_type: "", artifact_type: "" });
      const upload = (query: Record<string, string>, contentType: string) =>
        uploadArtifact(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, new TextEncoder().encode("bytes"), query, { "content-type": contentType });
      out.byHeader = await upload({ name: "chart.png" }, "image/png");
      out.queryWins = await upload({ mime_type: "text/csv" }, "image/png");
      out.unknown = await upload({}, "application/octet-stream");
      out.notAType = await upload({}, "png");
      // What Python's urllib and `curl --data-binary` send for a body they are given no type for.
      out.formDefault = await upload({ name: "notes.txt" }, "application/x-www-form-urlencoded");
      return w.reply("ok");
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "upq" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

it("an upload whose optional query options are sent empty is stored, those options unset", async () => {
  const ev = await host.postEvent(messageEvent("upq", "go"));
  await host.waitForRun(ev.body.run_id!);
  expect([out.template.status, out.template.body.error?.code ?? null]).toEqual([200, null]);
  expect(out.template.body.data).toMatchObject({ artifact_type: "file", size_bytes: 5 });
  expect(out.template.body.data.name ?? null).toBeNull();
  expect([out.named.status, out.named.body.data?.name]).toEqual([200, "report.txt"]);
});

it("an upload whose query names no mime_type takes its body's Content-Type, unless that says only \"bytes\", is a client's form default or is not a media type", async () => {
  const ev = await host.postEvent(messageEvent("upq-type", "go"));
  await host.waitForRun(ev.body.run_id!);
  expect([out.byHeader.status, out.byHeader.body.data?.mime_type, out.byHeader.body.data?.artifact_type]).toEqual([200, "image/png", "image"]);
  // The query is the protocol's way to say it: it wins.
  expect([out.queryWins.status, out.queryWins.body.data?.mime_type]).toEqual([200, "text/csv"]);
  for (const upload of [out.unknown, out.notAType, out.formDefault]) {
    expect([upload.status, upload.body.data?.mime_type ?? null, upload.body.data?.artifact_type]).toEqual([200, null, "file"]);
  }
});
