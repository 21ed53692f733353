import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { uploadArtifact } from "../support/host-api";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * Keys and labels the host could not give back as they were sent are refused
 * with 400, never stored altered: a NUL (the embedded driver cuts text short
 * at it when reading), an unpaired surrogate (stored as U+FFFD, so two keys
 * become one), a "__proto__" member (zod's records drop it).
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let conversations = 0;
const EVENT = { bot_id: "bot-keys", actor: { actor_type: "user", actor_id: "u1" } };

beforeAll(async () => {
  runner = await startScriptedRunner({
    name: "keys",
    runners: [{ name: "default", label: { en_US: "k" }, capabilities: {}, permissions: { storage: ["plugin"], artifacts: ["metadata", "read"] } }],
  });
  host = await startTestHost();
  await runner.register(host);
  await putAgent(host, { agent_id: "keys", runner_id: runner.runnerId(), scope: { type: "bot", id: "bot-keys" }, resource_policy: { allow: { storage: ["plugin"] } } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

const inRun = <T = any>(script: Parameters<typeof runner.run>[2]) => runner.run<T>(host, `keys-${++conversations}`, script, EVENT);
const refusal = (answer: { status: number; body: any }) => [answer.status, answer.body.error?.code, answer.body.error?.message];

describe("Host API keys and values that could not be read back as sent", () => {
  it("refuses state keys with a NUL or an unpaired surrogate, and stores nothing", async () => {
    const { result } = await inRun(async (api) => {
      const refused = [];
      for (const key of ["a\u0000b", "\ud800", "x\udc00"]) refused.push(refusal(await api("state.set", { scope: "conversation", key, value: 1 })));
      const get = refusal(await api("state.get", { scope: "conversation", key: "a\u0000b" }));
      const listed = (await api("state.list", { scope: "conversation" })).body.data.keys;
      return { refused, get, listed };
    });
    for (const r of [...result.refused, result.get]) expect(r).toEqual([400, "invalid_argument", expect.stringMatching(/key: must not contain NUL or unpaired surrogates/)]);
    expect(result.listed.filter((k: string) => k !== "external.conversation_id")).toEqual([]);
  });

  it("refuses storage keys with a NUL or an unpaired surrogate, and stores nothing", async () => {
    const { result } = await inRun(async (api) => {
      const refused = [];
      for (const key of ["s\u00001", "s\ud800"]) refused.push(refusal(await api("storage.set", { area: "plugin", key, value_base64: "YWI=" })));
      return { refused, listed: (await api("storage.keys", { area: "plugin", prefix: "s" })).body.data.keys };
    });
    for (const r of result.refused) expect(r).toEqual([400, "invalid_argument", expect.stringMatching(/must not contain NUL or unpaired surrogates/)]);
    expect(result.listed).toEqual([]);
  });

  it('refuses a value or params with a "__proto__" member, which would be dropped without a word', async () => {
    const { result } = await inRun(async (api, ctx) => {
      const value = JSON.parse('{"__proto__":{"x":1},"a":2}');
      const set = refusal(await api("state.set", { scope: "conversation", key: "obj", value }));
      const stored = (await api("state.get", { scope: "conversation", key: "obj" })).body.data;
      const raw = await fetch(`${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/api`, {
        method: "POST",
        headers: { authorization: `Bearer ${ctx.runtime.api.token}`, "content-type": "application/json" },
        body: '{"action":"host.version","params":{"__proto__":{"x":1}}}',
      });
      return { set, stored, params: [raw.status, ((await raw.json()) as any).error?.code] };
    });
    expect(result.set).toEqual([400, "invalid_argument", expect.stringMatching(/"__proto__" is not accepted/)]);
    expect(result.stored).toEqual({ value: null, found: false });
    expect(result.params).toEqual([400, "invalid_argument"]);
  });

  it("refuses an upload whose name or mime_type has a control character, or whose mime_type is not a media type", async () => {
    const { result } = await inRun(async (api, ctx) => {
      const up = (query: Record<string, string>) => uploadArtifact(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, new Uint8Array([1, 2, 3]), query);
      const refused = [];
      const queries: Record<string, string>[] = [{ name: "report.pdf\u0000.exe" }, { mime_type: "application/pdf\u0000x" }, { mime_type: "text/plain\r\nx-evil: 1" }, { mime_type: "pdf" }];
      for (const query of queries) {
        refused.push((await up(query)).status);
      }
      // What is accepted is described afterwards exactly as the upload answered.
      const ok = await up({ name: "résumé 📄.pdf", mime_type: "application/pdf; charset=binary" });
      const meta = (await api("artifact.metadata", { artifact_id: ok.body.data.artifact_id })).body.data;
      return { refused, uploaded: { name: ok.body.data.name, mime_type: ok.body.data.mime_type }, read: { name: meta.name, mime_type: meta.mime_type } };
    });
    expect(result.refused).toEqual([400, 400, 400, 400]);
    expect(result.read).toEqual(result.uploaded);
    expect(result.read).toEqual({ name: "résumé 📄.pdf", mime_type: "application/pdf; charset=binary" });
  });
});

describe("results and events that could not be read back as sent", () => {
  it("drops a state.updated with such a key or a \"__proto__\" member, and a message with a NUL, keeping what was valid", async () => {
    const conversation = `keys-${++conversations}`;
    const { runId } = await runner.run(host, conversation, async (_api, _ctx, emit) => {
      emit("state.updated", { scope: "conversation", key: "k\ud800", value: 1 });
      emit("state.updated", { scope: "conversation", key: "k\u0000", value: 2 });
      emit("state.updated", { scope: "conversation", key: "proto", value: JSON.parse('{"__proto__":{"admin":true},"plain":1}') });
      emit("state.updated", { scope: "conversation", key: "kept", value: 3 });
      emit("message.completed", { message: { role: "assistant", content: "the price is 10\u0000 and more" } });
      return "the valid answer";
    }, EVENT);
    const next = await runner.run(host, conversation, async (api) => (await api("state.list", { scope: "conversation" })).body.data.keys, EVENT);
    expect(next.result.filter((k: string) => k !== "external.conversation_id")).toEqual(["kept"]);
    const said = await host.query<{ content: string }>("SELECT content FROM transcript WHERE run_id = ? AND role = 'assistant'", [runId]);
    expect(said.map((r) => r.content)).toEqual(['"the valid answer"']);
    const dropped = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ?", [runId]);
    expect(dropped.map((r) => JSON.parse(r.data_json).result_type)).toEqual(["state.updated", "state.updated", "state.updated", "message.completed"]);
  });

  it("refuses an event whose text has a NUL with 400, recording nothing", async () => {
    const res = await host.admin("POST", "/v1/events", { event_type: "message.received", conversation_id: "keys-nul", actor: { actor_type: "user", actor_id: "u1" }, input: { text: "a\u0000b" } });
    expect([res.status, res.body.error.code, res.body.error.message]).toEqual([400, "invalid_request", expect.stringMatching(/input\.text: must not contain NUL/)]);
    expect(await host.query("SELECT event_id FROM event_log WHERE conversation_id = 'keys-nul'")).toEqual([]);
  });
});
