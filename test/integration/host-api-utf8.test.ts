import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * What the host could not give back as it was sent is refused, never stored altered: a Host API body that is not
 * UTF-8 (a `state.set` whose value holds a stray byte) is a 400 `invalid_argument`, as an event body is a 400.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const hold = deferred<void>();
const gotCtx = deferred<any>();

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "utf8",
    async onRun({ body }, res) {
      gotCtx.resolve(body.context);
      await hold.promise;
      resultWriter(res, body.context.run_id).reply("ok");
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "utf8" });
});
afterAll(async () => {
  hold.resolve();
  await host?.dispose();
  await runner?.close();
});

const call = (ctx: any, body: Uint8Array | string) =>
  fetch(`${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/api`, { method: "POST", headers: { authorization: `Bearer ${ctx.runtime.api.token}` }, body });

describe("a Host API body that is not UTF-8", () => {
  it("is refused (400 invalid_argument), not stored with U+FFFD in place of its bytes", async () => {
    await host.postEvent(messageEvent("utf8-c", "hi"));
    const ctx = await gotCtx.promise;
    // {"action":"state.set","params":{"scope":"conversation","key":"k","value":"a<0xC3>"}}: 0xC3 alone is no UTF-8.
    const raw = Buffer.concat([Buffer.from('{"action":"state.set","params":{"scope":"conversation","key":"k","value":"a'), Buffer.from([0xc3]), Buffer.from('"}}')]);
    const set = await call(ctx, raw);
    const setBody = (await set.json()) as { error?: { code: string } };
    expect({ status: set.status, code: setBody.error?.code }).toEqual({ status: 400, code: "invalid_argument" });
    // Nothing was stored.
    const get = (await (await call(ctx, JSON.stringify({ action: "state.get", params: { scope: "conversation", key: "k" } }))).json()) as { data?: unknown };
    expect(get.data).toEqual({ value: null, found: false });
  });
});
