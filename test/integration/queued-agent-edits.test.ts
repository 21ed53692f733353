import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * A run queued behind a busy conversation starts with its agent as it is when
 * it starts, not as it was when its event arrived: an operator's edit (grants,
 * runner_config, state policy, runner) applies to it, and a deleted or
 * disabled agent's queued run fails with `host.agent_unavailable` without
 * touching the event or the transcript.
 */
let host: TestHost;
type Runner = Awaited<ReturnType<typeof startAdHocRunner>>;
let first: Runner;
let second: Runner;
const gates = new Map<string, ReturnType<typeof deferred<void>>>();
const gate = (conversation: string) => {
  if (!gates.has(conversation)) gates.set(conversation, deferred());
  return gates.get(conversation)!;
};

/** "hold" waits for the conversation's gate; any other message reports what the run was given and what event.page answers. */
const behave = (name: string) =>
  async function ({ body }: { body: any }, res: import("node:http").ServerResponse) {
    const ctx = body.context;
    const w = resultWriter(res, ctx.run_id);
    if (ctx.input.text === "hold") {
      await gate(ctx.conversation.conversation_id).promise;
      return w.reply("held");
    }
    const page = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "event.page", { limit: 1 });
    w.reply(JSON.stringify({ runner: name, config: ctx.config, state_scopes: ctx.runtime.metadata.state_scopes, event_page: page.status, apis: ctx.context.available_apis }));
  };

const manifest = [{ name: "default", label: { en_US: "probe" }, capabilities: { streaming: true }, permissions: { events: ["get", "page"] } }];

beforeAll(async () => {
  first = await startAdHocRunner({ name: "first", runners: manifest, onRun: behave("first") });
  second = await startAdHocRunner({ name: "second", runners: manifest, onRun: behave("second") });
  host = await startTestHost();
  for (const r of [first, second]) expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: r.url })).status).toBe(201);
});
afterAll(async () => {
  for (const g of gates.values()) g.resolve();
  await host?.dispose();
  await first?.close();
  await second?.close();
});

const agentBody = (conversation: string, overrides: Record<string, unknown> = {}) => ({
  agent_id: `agent-${conversation}`,
  name: conversation,
  runner_id: first.runnerId(),
  runner_config: { version: 1 },
  event_types: ["message.received"],
  scope: { type: "conversation", id: conversation },
  state_policy: { enable_state: true, state_scopes: ["conversation"] },
  ...overrides,
});

/** A held run and a probe queued behind it, then `edit` while the probe waits; the held run is let go and the probe's run returned. */
async function queuedThenEdited(conversation: string, edit: () => Promise<void>) {
  expect((await host.admin("POST", "/v1/admin/agents", agentBody(conversation))).status).toBe(201);
  const held = await host.postEvent(messageEvent(conversation, "hold"));
  expect(held.body.disposition).toBe("started");
  const probe = await host.postEvent(messageEvent(conversation, "probe"));
  expect(probe.body.disposition).toBe("queued");
  await edit();
  gate(conversation).resolve();
  expect((await host.waitForRun(held.body.run_id!)).status).toBe("completed");
  return { probe, run: await host.waitForRun(probe.body.run_id!) };
}

const put = async (conversation: string, overrides: Record<string, unknown>) => {
  const res = await host.admin("PUT", `/v1/admin/agents/agent-${conversation}`, agentBody(conversation, overrides));
  expect(res.status).toBe(200);
};

describe("a queued run starts with its agent as it is then", () => {
  it("takes grants and runner_config edited while it waited", async () => {
    const { run } = await queuedThenEdited("qa-grants", () => put("qa-grants", { runner_config: { version: 2 }, resource_policy: { allow: { events: [] } } }));
    expect(run.status).toBe("completed");
    const reply = JSON.parse(run.message!.content as string);
    expect(reply.config).toEqual({ version: 2 });
    expect(reply.apis.event_page).toBe(false);
    expect(reply.event_page).toBe(403);
  });

  it("reads state for the state scopes the edit chose", async () => {
    const { run } = await queuedThenEdited("qa-scopes", () => put("qa-scopes", { state_policy: { enable_state: true, state_scopes: ["actor"] } }));
    expect(JSON.parse(run.message!.content as string).state_scopes).toEqual(["actor"]);
  });

  it("goes to the runner its agent was moved to, and the run records that runner", async () => {
    const { run } = await queuedThenEdited("qa-moved", () => put("qa-moved", { runner_id: second.runnerId() }));
    expect(run.status).toBe("completed");
    expect(JSON.parse(run.message!.content as string).runner).toBe("second");
    expect(run.runner_id).toBe(second.runnerId());
  });

  it.each([
    ["disabled", (c: string) => put(c, { enabled: false }), "disabled"],
    ["deleted", async (c: string) => expect((await host.admin("DELETE", `/v1/admin/agents/agent-${c}?runs=leave`)).status).toBe(200), "deleted"],
  ])("fails with host.agent_unavailable when its agent was %s, keeping the event and the transcript", async (what, edit, word) => {
    const conversation = `qa-${what}`;
    const { probe, run } = await queuedThenEdited(conversation, () => edit(conversation));
    expect(run.status).toBe("failed");
    expect(run.error).toEqual({ code: "host.agent_unavailable", message: expect.stringContaining(word) });
    expect(await host.query("SELECT event_id FROM event_log WHERE event_id = ?", [probe.body.event_id])).toHaveLength(1);
    const items = await host.query<{ role: string; content: string }>("SELECT role, content FROM transcript WHERE event_id = ? ORDER BY seq", [probe.body.event_id]);
    expect(items).toEqual([{ role: "user", content: "probe" }]);
    // The agent back as it was: the conversation's next event runs normally.
    if (what === "deleted") expect((await host.admin("POST", "/v1/admin/agents", agentBody(conversation))).status).toBe(201);
    else await put(conversation, { enabled: true });
    const next = await host.postEvent(messageEvent(conversation, "again"));
    expect((await host.waitForRun(next.body.run_id!)).status).toBe("completed");
  });
});
