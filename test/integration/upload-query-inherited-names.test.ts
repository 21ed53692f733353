import { afterAll, beforeAll, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README "Artifacts": `PUT /v1/runs/{run_id}/artifacts?name=&mime_type=&artifact_type=` takes "no other query
 * parameter: a misspelt one is a 400". A parameter named like a property every object inherits (`constructor`,
 * `toString`, `__proto__`) is another parameter too, yet the query is read into a plain object whose `??=` sees the
 * inherited value and drops it: the upload is stored as if it had not been sent.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const out: Record<string, number> = {};

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "upinh",
    runners: [{ name: "default", label: { en_US: "upinh" }, permissions: { artifacts: ["metadata", "read"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      for (const q of ["misspelt=x", "constructor=x", "toString=x", "__proto__=x", "name=b.txt", "mime_type=text/plain&mime_type=image/png"]) {
        const r = await fetch(`${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/artifacts?name=a.txt&${q}`, {
          method: "PUT",
          headers: { authorization: `Bearer ${ctx.runtime.api.token}` },
          body: "bytes",
        });
        await r.text();
        out[q] = r.status;
      }
      return w.reply("ok");
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "upinh" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

it("an upload with a query parameter named like an inherited property, or one given twice, is a 400, as any other unknown one", async () => {
  await host.waitForRun((await host.postEvent(messageEvent("upinh", "go"))).body.run_id!);
  expect(out).toEqual({ "misspelt=x": 400, "constructor=x": 400, "toString=x": 400, "__proto__=x": 400, "name=b.txt": 400, "mime_type=text/plain&mime_type=image/png": 400 });
});
