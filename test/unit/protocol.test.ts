import { describe, it, expect } from "vitest";
import {
  AgentRunContextSchema,
  AgentRunResultSchema,
  API_ERROR_STATUS,
  API_GROUP_OF_ACTION,
  ARTIFACT_INLINE_MAX_BYTES,
  ContentElementSchema,
  EventEnvelopeSchema,
  HOST_API_ACTIONS,
  HOST_API_PARAMS,
  HostApiResponseSchema,
  JsonValueSchema,
  MAX_JSON_DEPTH,
  PERMISSION_VALUES,
  PermissionsSchema,
  RESULT_PAYLOAD_SCHEMAS,
  RESULT_TYPES,
  STRICT_RESULT_TYPES,
  TranscriptItemSchema,
  formatRunnerId,
  parseHostApiParams,
  parseResultPayload,
  parseRunnerServiceManifest,
  type AgentRunContextInput,
  type ResultType,
} from "../../src/protocol";

const runner = {
  name: "default",
  label: { en_US: "Default", zh_Hans: "默认" },
  description: { en_US: "Answers questions" },
  capabilities: { streaming: true, steering: true },
  permissions: { models: ["invoke", "stream"], history: ["page"], storage: ["plugin"] },
  config_schema: [
    { name: "prompt", type: "text", label: { en_US: "Prompt" }, required: false, default: "" },
    { name: "model", type: "select", label: "Model", options: ["a", { name: "b", label: "B" }] },
  ],
  metadata: { homepage: "https://example.com" },
};

const service = {
  protocol: "agent-runner/v1",
  author: "acme",
  name: "support-bot",
  version: "1.4.0",
  runners: [runner],
};

describe("manifest", () => {
  it("parses a valid service manifest and forms the runner id", () => {
    const parsed = parseRunnerServiceManifest(service);
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    expect(parsed.skipped).toEqual([]);
    expect(parsed.runners).toHaveLength(1);
    expect(parsed.runners[0].capabilities.streaming).toBe(true);
    expect(parsed.runners[0].permissions.models).toEqual(["invoke", "stream"]);
    expect(formatRunnerId(parsed.service.author, parsed.service.name, parsed.runners[0].name)).toBe(
      "http:acme/support-bot/default",
    );
  });

  it("skips an invalid runner without hiding the valid ones", () => {
    const parsed = parseRunnerServiceManifest({
      ...service,
      runners: [
        { ...runner, name: "planner", capabilities: { streaming: true, telepathy: true } },
        runner,
        { ...runner, permissions: { models: ["invoke", "train"] } },
        { ...runner, name: "Bad Name" },
        runner,
      ],
    });
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    expect(parsed.runners.map((r) => r.name)).toEqual(["default"]);
    expect(parsed.skipped.map((s) => s.index)).toEqual([0, 2, 3, 4]);
    expect(parsed.skipped[0]).toMatchObject({ name: "planner" });
    expect(parsed.skipped[0].issues).toContain("telepathy");
    expect(parsed.skipped[1].issues).toContain("permissions.models.1");
    expect(parsed.skipped[3].issues).toContain("duplicate");
  });

  it("rejects unknown permission groups and values, and a wrong protocol", () => {
    expect(PermissionsSchema.safeParse({ secrets: ["read"] }).success).toBe(false);
    expect(PermissionsSchema.safeParse({ files: ["delete"] }).success).toBe(false);
    for (const [group, values] of Object.entries(PERMISSION_VALUES)) {
      expect(PermissionsSchema.safeParse({ [group]: [...values] }).success).toBe(true);
    }
    expect(parseRunnerServiceManifest({ ...service, protocol: "agent-runner/v2" }).ok).toBe(false);
  });
});

describe("common", () => {
  it("JsonValue accepts JSON and refuses what JSON cannot carry", () => {
    expect(JsonValueSchema.safeParse({ a: [1, "x", null, true, { b: 2.5 }] }).success).toBe(true);
    expect(JsonValueSchema.safeParse(() => 1).success).toBe(false);
    expect(JsonValueSchema.safeParse(undefined).success).toBe(false);
    expect(JsonValueSchema.safeParse({ a: undefined }).success).toBe(false);
    expect(JsonValueSchema.safeParse({ a: () => 1 }).success).toBe(false);
    expect(JsonValueSchema.safeParse(Number.NaN).success).toBe(false);
    expect(JsonValueSchema.safeParse(new Date()).success).toBe(false);
  });

  it("JsonValue refuses hostile nesting instead of overflowing the stack", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(JsonValueSchema.safeParse(deep).success).toBe(false);
    let ok: unknown = 1;
    for (let i = 0; i < MAX_JSON_DEPTH - 1; i++) ok = { k: ok };
    expect(JsonValueSchema.safeParse(ok).success).toBe(true);
  });

  it("image elements need an artifact_id or an http(s) url", () => {
    expect(ContentElementSchema.safeParse({ type: "image", url: "https://x.test/a.png" }).success).toBe(true);
    expect(ContentElementSchema.safeParse({ type: "image", artifact_id: "art_1" }).success).toBe(true);
    expect(ContentElementSchema.safeParse({ type: "image" }).success).toBe(false);
    expect(ContentElementSchema.safeParse({ type: "image", url: "javascript:alert(1)" }).success).toBe(false);
    expect(ContentElementSchema.safeParse({ type: "video", artifact_id: "a" }).success).toBe(false);
  });
});

describe("result payloads", () => {
  const valid: Record<ResultType, unknown> = {
    "message.delta": { chunk: { role: "assistant", content: "hel" } },
    "message.completed": {
      message: { role: "assistant", content: [{ type: "text", text: "hi" }, { type: "file", artifact_id: "a1" }] },
    },
    "tool.call.started": { tool_call_id: "c1", tool_name: "search", parameters: { q: "x" } },
    "tool.call.completed": { tool_call_id: "c1", tool_name: "search", result: null, error: null },
    "artifact.created": { artifact_type: "image", mime_type: "image/png", content_base64: "aGVsbG8=" },
    "state.updated": { scope: "conversation", key: "external.session_id", value: { id: "abc" } },
    "action.requested": { action: "message.edit", target: { message_id: "m" }, payload: { text: "t" } },
    "run.completed": { finish_reason: "stop", message: null },
    "run.failed": { code: "runner.error", error: "boom", retryable: false },
  };
  const invalid: Record<string, unknown> = {
    "message.delta": { chunk: { role: "robot", content: "x" } },
    "message.completed": { message: { role: "assistant", content: "hi" }, extra: 1 },
    "artifact.created": { mime_type: "image/png" },
    "state.updated": { scope: "galaxy", key: "k", value: 1 },
    "action.requested": { target: { message_id: "m" } },
    "run.completed": { finish_reason: "" },
    "run.failed": { code: "x", error: "boom", retryable: "no" },
  };

  it("covers every result type, with strict ones all but tool.call.*", () => {
    expect(Object.keys(RESULT_PAYLOAD_SCHEMAS).sort()).toEqual([...RESULT_TYPES].sort());
    expect([...STRICT_RESULT_TYPES].sort()).toEqual(Object.keys(invalid).sort());
  });

  for (const type of RESULT_TYPES) {
    it(`${type}: accepts a valid payload`, () => {
      const parsed = parseResultPayload(type, valid[type]);
      expect(parsed.kind).toBe("ok");
      if (parsed.kind === "ok") expect(parsed.result.type).toBe(type);
    });
  }

  for (const [type, data] of Object.entries(invalid)) {
    it(`${type}: rejects an invalid payload`, () => {
      const parsed = parseResultPayload(type, data);
      expect(parsed.kind).toBe("invalid");
      if (parsed.kind === "invalid") expect(parsed.issues.length).toBeGreaterThan(0);
    });
  }

  it("caps state keys and values and inline artifacts", () => {
    expect(parseResultPayload("state.updated", { scope: "actor", key: "k".repeat(257), value: 1 }).kind).toBe("invalid");
    expect(parseResultPayload("state.updated", { scope: "actor", key: "", value: 1 }).kind).toBe("invalid");
    expect(parseResultPayload("state.updated", { scope: "actor", key: "k" }).kind).toBe("invalid");
    expect(parseResultPayload("state.updated", { scope: "actor", key: "k", value: null }).kind).toBe("ok");
    expect(
      parseResultPayload("state.updated", { scope: "actor", key: "k", value: "x".repeat(256 * 1024) }).kind,
    ).toBe("invalid");
    const big = Buffer.alloc(ARTIFACT_INLINE_MAX_BYTES + 1).toString("base64");
    const fits = Buffer.alloc(ARTIFACT_INLINE_MAX_BYTES).toString("base64");
    expect(parseResultPayload("artifact.created", { artifact_type: "file", content_base64: big }).kind).toBe("invalid");
    expect(parseResultPayload("artifact.created", { artifact_type: "file", content_base64: fits }).kind).toBe("ok");
    expect(parseResultPayload("artifact.created", { artifact_type: "file", content_base64: "not base64!" }).kind).toBe(
      "invalid",
    );
  });

  it("reports unknown types and keeps extra fields of tool.call.*", () => {
    expect(parseResultPayload("message.reaction", { emoji: "+1" })).toEqual({ kind: "unknown", type: "message.reaction" });
    expect(parseResultPayload("constructor", {}).kind).toBe("unknown");
    const parsed = parseResultPayload("tool.call.started", { tool_call_id: "c", tool_name: "t", latency_ms: 12 });
    expect(parsed.kind).toBe("ok");
    if (parsed.kind === "ok" && parsed.result.type === "tool.call.started") {
      expect(parsed.result.data.latency_ms).toBe(12);
    }
  });

  it("envelope defaults data and checks sequence", () => {
    const env = AgentRunResultSchema.parse({ run_id: "r1", type: "run.completed" });
    expect(env.data).toEqual({});
    // 0 parses (the host warns and takes the result as unnumbered); a fraction does not.
    expect(AgentRunResultSchema.safeParse({ run_id: "r1", type: "x", sequence: 0 }).success).toBe(true);
    expect(AgentRunResultSchema.safeParse({ run_id: "r1", type: "x", sequence: 1.5 }).success).toBe(false);
  });
});

describe("host api params", () => {
  it("applies defaults", () => {
    expect(HOST_API_PARAMS["history.page"].parse({})).toEqual({ limit: 20, direction: "backward" });
    expect(HOST_API_PARAMS["event.page"].parse({}).limit).toBe(20);
    expect(HOST_API_PARAMS["steering.pull"].parse({}).mode).toBe("all");
    expect(HOST_API_PARAMS["artifact.read"].parse({ artifact_id: "a" })).toEqual({
      artifact_id: "a",
      offset: 0,
      length: 1024 * 1024,
    });
    expect(HOST_API_PARAMS["knowledge.retrieve"].parse({ kb_id: "k", query: "q" }).top_k).toBe(5);
    expect(HOST_API_PARAMS["history.search"].parse({ query: "q" }).top_k).toBe(10);
    expect(HOST_API_PARAMS["tool.call"].parse({ tool_name: "t" }).parameters).toEqual({});
  });

  it("caps counts and sizes, refuses what is under 1 and unknown params", () => {
    // Above a cap is the cap, as LangBot's host caps it.
    expect(HOST_API_PARAMS["history.page"].parse({ limit: 101 }).limit).toBe(100);
    expect(HOST_API_PARAMS["event.page"].parse({ limit: 5000 }).limit).toBe(100);
    expect(HOST_API_PARAMS["steering.pull"].parse({ limit: 500 }).limit).toBe(100);
    expect(HOST_API_PARAMS["state.list"].parse({ scope: "runner", limit: 101 }).limit).toBe(100);
    expect(HOST_API_PARAMS["storage.keys"].parse({ area: "plugin", limit: 1001 }).limit).toBe(1000);
    expect(HOST_API_PARAMS["history.page"].safeParse({ limit: 2.5 }).success).toBe(false);
    expect(HOST_API_PARAMS["history.page"].safeParse({ limit: 0 }).success).toBe(false);
    expect(HOST_API_PARAMS["history.page"].safeParse({ direction: "sideways" }).success).toBe(false);
    expect(HOST_API_PARAMS["artifact.read"].parse({ artifact_id: "a", length: 1024 * 1024 + 1 }).length).toBe(1024 * 1024);
    expect(HOST_API_PARAMS["artifact.read"].safeParse({ artifact_id: "a", offset: -1 }).success).toBe(false);
    expect(HOST_API_PARAMS["history.search"].safeParse({ query: "" }).success).toBe(false);
    expect(HOST_API_PARAMS["history.search"].parse({ query: "q", top_k: 51 }).top_k).toBe(50);
    expect(HOST_API_PARAMS["history.page"].safeParse({ limt: 10 }).success).toBe(false);
    expect(HOST_API_PARAMS["state.set"].safeParse({ scope: "runner", key: "k", value: undefined }).success).toBe(false);
    // Its value_base64 is checked by the action, after the area (§8): here only its type.
    expect(HOST_API_PARAMS["storage.set"].safeParse({ area: "plugin", key: "k", value_base64: 7 }).success).toBe(false);
  });

  it("parseHostApiParams maps failures to API error codes and narrows on action", () => {
    expect(parseHostApiParams("files.delete", {})).toMatchObject({ ok: false, code: "not_found" });
    expect(parseHostApiParams("event.get", {})).toMatchObject({ ok: false, code: "invalid_argument" });
    const call = parseHostApiParams("state.list", { scope: "conversation" });
    expect(call.ok).toBe(true);
    if (call.ok && call.action === "state.list") expect(call.params.limit).toBe(100);
    expect(parseHostApiParams("host.version", undefined).ok).toBe(true);
  });

  it("gates every action", () => {
    for (const action of HOST_API_ACTIONS) expect(action in API_GROUP_OF_ACTION).toBe(true);
    expect(API_GROUP_OF_ACTION["history.page"]).toBe("history_page");
    expect(API_GROUP_OF_ACTION["artifact.upload"]).toBe("artifact_read");
    expect(API_GROUP_OF_ACTION["model.rerank"]).toBe("resources");
    expect(API_GROUP_OF_ACTION["host.version"]).toBeNull();
  });
});

describe("host api responses and errors", () => {
  it("validates response bodies and maps codes to statuses", () => {
    const err = HostApiResponseSchema.parse({ ok: false, error: { code: "rate_limited", message: "slow down" } });
    expect(err.ok).toBe(false);
    if (!err.ok) expect(err.error).toEqual({ code: "rate_limited", message: "slow down", retryable: false, details: {} });
    expect(HostApiResponseSchema.safeParse({ ok: false, error: { code: "teapot", message: "x" } }).success).toBe(false);
    expect(API_ERROR_STATUS.unauthorized).toBe(403);
    expect(API_ERROR_STATUS.deadline_exceeded).toBe(408);
  });

  it("accepts a transcript item with nulls from the database", () => {
    const item = TranscriptItemSchema.parse({
      transcript_id: "t1",
      event_id: "e1",
      conversation_id: "c1",
      thread_id: null,
      role: "user",
      item_type: "message",
      content: "hi",
      content_json: null,
      seq: 1,
      cursor: "opaque",
      created_at: "2026-01-01T00:00:00.000Z",
    });
    expect(item.artifact_refs).toEqual([]);
    expect(item.metadata).toEqual({});
  });
});

describe("run context", () => {
  it("fills defaults and tolerates unknown fields", () => {
    const input: AgentRunContextInput & { future_field: string } = {
      run_id: "r1",
      trigger: { type: "message.received", source: "platform" },
      event: { event_id: "e1", event_type: "message.received", source: "slack" },
      input: { text: "hello" },
      delivery: { surface: "slack" },
      resources: {},
      context: { inline_policy: { mode: "current_event" }, available_apis: { history_page: true } },
      state: {},
      runtime: { api: { base_url: "https://host.test", token: "tok", expires_at: "2026-01-01T00:05:00Z" } },
      future_field: "ignored",
    };
    const ctx = AgentRunContextSchema.parse(input);
    expect(ctx.input.contents).toEqual([]);
    expect(ctx.context.available_apis.history_page).toBe(true);
    expect(ctx.context.available_apis.storage).toBe(false);
    expect(ctx.resources.storage).toEqual({ plugin_storage: false, workspace_storage: false });
    expect("future_field" in ctx).toBe(false);
  });
});

describe("event envelope", () => {
  const envelope = {
    event_id: "crm:T1:Ev123",
    event_type: "message.received",
    event_time: "2026-01-01T00:00:00Z",
    conversation_id: "C123",
    actor: { actor_type: "user", actor_id: "U1" },
    input: { text: "hello", contents: [{ type: "text", text: "hello" }] },
  };

  it("parses a valid envelope with defaults", () => {
    const parsed = EventEnvelopeSchema.parse(envelope);
    expect(parsed.data).toEqual({});
    expect(parsed.metadata).toEqual({});
    expect(parsed.actor.metadata).toEqual({});
    const { input: _input, ...withoutInput } = envelope;
    expect(EventEnvelopeSchema.parse(withoutInput).input).toEqual({});
  });

  it("rejects unknown top-level keys, a missing conversation_id and bad values", () => {
    const unknownKey = EventEnvelopeSchema.safeParse({ ...envelope, messages: [] });
    expect(unknownKey.success).toBe(false);
    expect(unknownKey.error?.issues[0]).toMatchObject({ code: "unrecognized_keys", keys: ["messages"] });
    const { conversation_id: _c, ...noConversation } = envelope;
    const missing = EventEnvelopeSchema.safeParse(noConversation);
    expect(missing.success).toBe(false);
    expect(missing.error?.issues[0].path).toEqual(["conversation_id"]);
    expect(EventEnvelopeSchema.safeParse({ ...envelope, event_type: "message.sent" }).success).toBe(false);
    expect(EventEnvelopeSchema.safeParse({ ...envelope, event_id: "has space" }).success).toBe(false);
    // The host's own ids: a chat platform's and its records'.
    for (const event_id of ["slack:T1:Ev123", "telegram:b:1", "hev_1"]) expect(EventEnvelopeSchema.safeParse({ ...envelope, event_id }).success).toBe(false);
    expect(EventEnvelopeSchema.safeParse({ ...envelope, metadata: { steering: {} } }).success).toBe(false);
    expect(EventEnvelopeSchema.safeParse({ ...envelope, event_time: "0000-01-01T00:30:00+01:00" }).success).toBe(false);
    // Not a time: one issue, saying so (not also that it falls outside years it has none of).
    expect(EventEnvelopeSchema.safeParse({ ...envelope, event_time: "yesterday" }).error?.issues.map((i) => i.path.join("."))).toEqual(["event_time"]);
    expect(EventEnvelopeSchema.safeParse({ ...envelope, input: { text: "é".repeat(40_000) } }).success).toBe(false);
    // Text sent as parts is held to the same cap, counted over all its parts.
    const parts = (n: number) => Array.from({ length: n }, () => ({ type: "text", text: "é".repeat(10_000) }));
    expect(EventEnvelopeSchema.safeParse({ ...envelope, input: { contents: parts(3) } }).success).toBe(true);
    const tooLong = EventEnvelopeSchema.safeParse({ ...envelope, input: { contents: parts(4) } });
    expect(tooLong.error?.issues[0]).toMatchObject({ path: ["input", "contents"], message: expect.stringMatching(/attachment/) });
  });
});
