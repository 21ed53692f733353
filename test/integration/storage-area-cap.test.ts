import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { deferred } from "../support/host-api";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * What one storage area keeps across runs is bounded (STORAGE_MAX_AREA_KEYS, and STORAGE_MAX_AREA_BYTES of decoded
 * values, each counted with its base64 padding: three bytes per four characters): a storage.set past the cap writes nothing and is answered 413, an overwrite no larger and a delete always go
 * through, the database decides each write alone however many conversations race for the last room, and the usage it
 * checks against stays exact, a deleted service's area swept with it.
 */
const MAX_KEYS = 3;
// Sizes are multiples of 3 (no base64 padding) unless a test says otherwise: decoded and counted bytes are the same.
const MAX_VALUE = 999;
const MAX_BYTES = 2 * MAX_VALUE + 501;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
const storing = (name: string) => [{ name: "default", label: { en_US: name }, capabilities: {}, permissions: { storage: ["plugin", "workspace"] } }];
const bothAreas = { allow: { storage: ["plugin", "workspace"] } };

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "storage-capped", runners: storing("capped") });
  host = await startTestHost({
    vars: { STORAGE_MAX_AREA_KEYS: String(MAX_KEYS), STORAGE_MAX_VALUE_BYTES: String(MAX_VALUE), STORAGE_MAX_AREA_BYTES: String(MAX_BYTES) },
  });
  await runner.register(host);
  await putAgent(host, { agent_id: "capped", runner_id: runner.runnerId(), scope: { type: "bot", id: "bot-cap" }, resource_policy: bothAreas });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

/** An event of bot-cap in `workspace`: each test has a workspace area of its own. */
const inWorkspace = (workspace: string) => ({ bot_id: "bot-cap", workspace_id: workspace });
/** `n` bytes as base64. */
const ofBytes = (n: number) => Buffer.alloc(n, 7).toString("base64");

/** The usage rows are what storage holds, area by area, three bytes per four base64 characters: the triggers kept them exact. */
async function expectUsageExact() {
  const rows = await host.query<{ area: string; owner_key: string; value_base64: string }>("SELECT area, owner_key, value_base64 FROM storage");
  const counted = new Map<string, { area: string; owner_key: string; keys: number; bytes: number }>();
  for (const r of rows) {
    const at = `${r.area} ${r.owner_key}`;
    const area = counted.get(at) ?? { area: r.area, owner_key: r.owner_key, keys: 0, bytes: 0 };
    area.keys++;
    area.bytes += (r.value_base64.length / 4) * 3;
    counted.set(at, area);
  }
  const kept = await host.query<{ area: string; owner_key: string; keys: number; bytes: number }>("SELECT area, owner_key, keys, bytes FROM storage_usage");
  const byArea = (list: { area: string; owner_key: string; keys: number; bytes: number }[]) =>
    list.map((r) => ({ area: r.area, owner_key: r.owner_key, keys: Number(r.keys), bytes: Number(r.bytes) })).sort((a, b) => `${a.area} ${a.owner_key}`.localeCompare(`${b.area} ${b.owner_key}`));
  expect(byArea(kept)).toEqual(byArea([...counted.values()]));
}

describe("a storage area's cap", () => {
  it("refuses a new key past STORAGE_MAX_AREA_KEYS (413, not retryable, naming the cap and the usage), writes nothing, and lets keys be overwritten, deleted, and the room a delete makes be used", async () => {
    const { result } = await runner.run(host, "cap-keys", async (api) => {
      const set = async (key: string, bytes: number) => (await api("storage.set", { area: "workspace", key, value_base64: ofBytes(bytes) })).body;
      const filled = [await set("k1", 3), await set("k2", 6), await set("k3", 9)];
      // One byte: counted as 3, its padding with it.
      const over = await set("k-over", 1);
      return {
        filled,
        over,
        overWritten: (await api("storage.get", { area: "workspace", key: "k-over" })).body.data,
        overwrite: await set("k1", 3),
        deleted: (await api("storage.delete", { area: "workspace", key: "k2" })).body,
        again: await set("k-over", 1),
        keys: (await api("storage.keys", { area: "workspace" })).body.data.keys,
      };
    }, inWorkspace("ws-keys"));
    for (const answer of [...result.filled, result.overwrite, result.deleted, result.again]) expect(answer).toEqual({ ok: true, data: { ok: true } });
    expect(result.over).toEqual({
      ok: false,
      error: {
        code: "payload_too_large",
        message: expect.stringMatching(/^storage area workspace holds 3 keys, and at most 3 are allowed \(STORAGE_MAX_AREA_KEYS\); nothing was written/),
        retryable: false,
        details: { area: "workspace", setting: "STORAGE_MAX_AREA_KEYS", limit: MAX_KEYS, keys: MAX_KEYS, bytes: 3 + 6 + 9, value_bytes: 3 },
      },
    });
    expect(result.overWritten).toEqual({ value_base64: null, found: false });
    expect(result.keys).toEqual(["k-over", "k1", "k3"]);
    await expectUsageExact();
  });

  it("counts decoded bytes against STORAGE_MAX_AREA_BYTES, padding included: a new key or a larger overwrite past it is refused, a value no larger always taken", async () => {
    const { result } = await runner.run(host, "cap-bytes", async (api) => {
      const set = async (key: string, bytes: number) => (await api("storage.set", { area: "plugin", key, value_base64: ofBytes(bytes) })).body;
      return {
        first: await set("a", MAX_VALUE),
        second: await set("b", MAX_VALUE),
        third: await set("c", 504),
        // 502 bytes are 672 base64 characters, "==" among them: counted as 504, past the cap as those were.
        padded: await set("c", 502),
        fits: await set("c", 501),
        grown: await set("c", 504),
        shrunk: await set("a", 3),
        grownAfter: await set("c", MAX_VALUE),
      };
    }, inWorkspace("ws-bytes"));
    for (const k of ["first", "second", "fits", "shrunk", "grownAfter"]) expect(result[k], k).toEqual({ ok: true, data: { ok: true } });
    expect(result.third.error).toMatchObject({ code: "payload_too_large", retryable: false, details: { area: "plugin", setting: "STORAGE_MAX_AREA_BYTES", limit: MAX_BYTES, keys: 2, bytes: 2 * MAX_VALUE, value_bytes: 504 } });
    expect(result.padded.error).toMatchObject({ details: { setting: "STORAGE_MAX_AREA_BYTES", bytes: 2 * MAX_VALUE, value_bytes: 504 } });
    expect(result.grown.error).toMatchObject({ details: { setting: "STORAGE_MAX_AREA_BYTES", keys: 3, bytes: MAX_BYTES, value_bytes: 504 } });
    expect(result.grown.error.message).toContain("in place of 501 bytes");
    await expectUsageExact();
  });

  it("gives the last key to exactly one of the writes of two conversations' runs racing for it", async () => {
    await runner.run(host, "race-fill", async (api) => {
      for (let i = 1; i < MAX_KEYS; i++) await api("storage.set", { area: "workspace", key: `k${i}`, value_base64: ofBytes(1) });
    }, inWorkspace("ws-race"));
    const bothIn = deferred();
    let arrived = 0;
    const race = (conversation: string) =>
      runner.run(host, conversation, async (api) => {
        if (++arrived === 2) bothIn.resolve();
        await bothIn.promise;
        const answers = await Promise.all([1, 2, 3].map((i) => api("storage.set", { area: "workspace", key: `${conversation}-${i}`, value_base64: ofBytes(1) })));
        return answers.map((a) => a.status);
      }, inWorkspace("ws-race"));
    const [a, b] = await Promise.all([race("race-a"), race("race-b")]);
    expect([...a.result, ...b.result].sort()).toEqual([200, 413, 413, 413, 413, 413]);
    expect(await host.query("SELECT key FROM storage WHERE area = 'workspace' AND owner_key = 'ws-race'")).toHaveLength(MAX_KEYS);
    await expectUsageExact();
  });

  it("leaves no usage behind once retention has swept a deleted service's plugin area", async () => {
    const gone = await startScriptedRunner({ name: "storage-gone", runners: storing("gone") });
    try {
      await gone.register(host);
      await putAgent(host, { agent_id: "gone", runner_id: gone.runnerId(), scope: { type: "bot", id: "bot-gone" }, resource_policy: bothAreas });
      await gone.run(host, "gone-conv", async (api) => {
        for (const key of ["a", "b"]) await api("storage.set", { area: "plugin", key, value_base64: ofBytes(6) });
      }, { bot_id: "bot-gone" });
      const serviceId = (await host.admin("GET", "/v1/admin/runners?limit=200")).body.items.find((r: { runner_id: string }) => r.runner_id === gone.runnerId()).service_id;
      const usage = () => host.query<{ keys: number; bytes: number }>("SELECT keys, bytes FROM storage_usage WHERE area = 'plugin' AND owner_key = ?", [serviceId]);
      expect((await usage()).map((r) => [Number(r.keys), Number(r.bytes)])).toEqual([[2, 12]]);
      expect((await host.admin("DELETE", "/v1/admin/agents/gone")).status).toBe(200);
      expect((await host.admin("DELETE", `/v1/admin/runner-services/${serviceId}`)).status).toBe(204);
      await host.triggerScheduled();
      expect(await host.query("SELECT key FROM storage WHERE owner_key = ?", [serviceId])).toEqual([]);
      expect(await usage()).toEqual([]);
      await expectUsageExact();
    } finally {
      await gone.close();
    }
  });
});
