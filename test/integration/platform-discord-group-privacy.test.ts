import type { KeyObject } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { discordKeyPair, postInteraction } from "../support/discord-signing";
import { startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { callHostApi, deferred } from "../support/host-api";
import { readConversation, type ConversationReads } from "../support/conversation-reads";
import { startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * Several users in one Discord channel share its conversation; a press on an ephemeral message is its user's alone
 * (README "Who sees what in a group chat"). Through the real signed webhook: such a press is never pulled by another
 * user's run nor pulls a public message into its own, neither cancels the other's answer under `interrupt`, and runs
 * answering anyone else read nothing of it (its words, its answer, its records) in history or events.
 */
const APPLICATION_ID = "5566778899001122";
const BOT_TOKEN = "discord-bot-token-PRIVACY-0123456789";
let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let privateKey: KeyObject;
const bots: Record<"steer" | "interrupt", { botId: string; webhookUrl: string }> = {} as never;
const gates = new Map<string, ReturnType<typeof deferred<void>>>();
const gate = (tag: string) => gates.get(tag) ?? gates.set(tag, deferred()).get(tag)!;
/** Each run as its runner began it (its event and input's text), and what a `read` run found, by run id. */
const begun: { runId: string; eventId: string; text: string; metadata: Record<string, unknown> }[] = [];
const reads = new Map<string, ConversationReads>();

let ids = 0;
function discordApi(call: PlatformCall): FakeReply {
  const m = /^\/webhooks\/([^/]+)\/([^/]+)(?:\/messages\/(.+))?$/.exec(call.path);
  if (!m || m[1] !== APPLICATION_ID) return { status: 403, json: { message: "Missing Access", code: 50001 } };
  if (call.method === "PATCH") return { json: { id: m[3] === "@original" ? `original_${m[2].slice(-12)}` : m[3] } };
  return { json: { id: `followup_${++ids}` } };
}

beforeAll(async () => {
  const keys = discordKeyPair();
  privateKey = keys.privateKey;
  fake = await startFakePlatform(discordApi);
  runner = await startAdHocRunner({
    name: "discord-group",
    runners: [{ name: "default", label: { en_US: "g" }, capabilities: { streaming: true, steering: true }, permissions: { history: ["page", "search"], events: ["get", "page"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const text = String(ctx.input.text ?? "");
      const api = (action: string, params: Record<string, unknown> = {}) => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, action, params);
      begun.push({ runId: ctx.run_id, eventId: ctx.event.event_id, text, metadata: ctx.metadata });
      const w = resultWriter(res, ctx.run_id);
      // `read <event id>`: what this run can read of the conversation, and whether it may read that event.
      if (text.startsWith("read ")) {
        reads.set(ctx.run_id, await readConversation(ctx, text.slice("read ".length)));
        return w.reply("read");
      }
      if (text.startsWith("hold ")) await gate(text.slice("hold ".length)).promise;
      const pulled = ctx.context.available_apis.steering_pull ? (await api("steering.pull", { mode: "all" })).body.data.items.map((i: any) => i.input.text) : [];
      w.reply(`re: ${[text, ...pulled].join(" + ")}`);
    },
  });
  host = await startTestHost();
  for (const [name, concurrency] of [["steer", {}], ["interrupt", { strategy: "interrupt" }]] as const) {
    const created = await host.admin("POST", "/v1/admin/bots", { platform: "discord", api_base_url: fake.url, credentials: { application_id: APPLICATION_ID, public_key: keys.publicKeyHex, bot_token: BOT_TOKEN } });
    expect(created.status).toBe(201);
    bots[name] = { botId: created.body.bot_id, webhookUrl: created.body.webhook_url };
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: `group-${name}`, scope: { type: "bot", id: created.body.bot_id } });
    await putAgent(host, { agent_id: `group-${name}`, runner_id: runner.runnerId(), scope: { type: "bot", id: created.body.bot_id }, concurrency });
  }
});
afterAll(async () => {
  for (const g of gates.values()) g.resolve();
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

let seq = 0;
/**
 * An interaction in `channel` by `user`: a slash command everyone sees, or (`ephemeral`) a press on a message only that
 * user sees, or (`"user app"`) a slash command of the app installed only to the user (its answer may end in their DMs).
 */
function interaction(channel: string, user: string, text: string, ephemeral: boolean | "user app" = false) {
  const id = `8${String(++seq).padStart(17, "0")}`;
  const installs = ephemeral === "user app" ? { authorizing_integration_owners: { "1": user } } : {};
  const base = { id, application_id: APPLICATION_ID, token: `token-${id}-secret`, version: 1, guild_id: "G1", channel_id: channel, channel: { id: channel, type: 0 }, member: { user: { id: user, username: user.toLowerCase() } }, ...installs };
  return ephemeral === true
    ? { ...base, type: 3, message: { id: `M-${id}`, flags: 64 }, data: { custom_id: "menu", component_type: 3, values: [text] } }
    : { ...base, type: 2, data: { id: "cmd", name: "ask", type: 1, options: [{ name: "q", type: 3, value: text }] } };
}
type Interaction = ReturnType<typeof interaction>;
const post = (bot: keyof typeof bots, i: Interaction) => postInteraction(bots[bot].webhookUrl, privateKey, i);
const eventIdOf = (bot: keyof typeof bots, i: Interaction) => `discord:${bots[bot].botId}:${i.id}`;
/** The run of an interaction's own (begun by its runner). */
const runOf = (bot: keyof typeof bots, i: Interaction) => waitFor(() => begun.find((b) => b.eventId === eventIdOf(bot, i))?.runId, 10_000, `the run of ${i.id}`);
/** What the interaction's own token showed (its deferred response edited, its follow-ups), with their ephemeral flags. */
const shownFor = (i: Interaction) => fake.calls.filter((c) => c.path.startsWith(`/webhooks/${APPLICATION_ID}/${i.token}`)).map((c) => ({ content: c.body?.content, flags: c.body?.flags }));
const answered = (i: Interaction) => waitFor(() => shownFor(i).find((s) => s.content)?.content, 15_000, `the answer to ${i.id}`);

/** What a run of `user`'s interaction in `channel` read of the conversation, and of the event `eventId`. */
async function readAs(channel: string, user: string, eventId: string, ephemeral: boolean) {
  const i = interaction(channel, user, `read ${eventId}`, ephemeral);
  await post("steer", i);
  const runId = await runOf("steer", i);
  await host.waitForRun(runId);
  // The run is told whose eyes alone its answer is for, if anyone's.
  return { ...reads.get(runId)!, audience: begun.find((b) => b.runId === runId)!.metadata.private_audience };
}

const DEFERRED = { type: 5 };
const DEFERRED_PRIVATELY = { type: 5, data: { flags: 64 } };
const ADDED = { type: 4, data: { content: "Added to the answer in progress.", flags: 64 } };

describe("Discord: one channel, several users, some presses private", () => {
  it("a press on an ephemeral message is never pulled by another user's public run, nor a public message by a private run: each has its own run, answered for its own eyes; same eyes still steer", async () => {
    const c = "C-STEER";
    const ada = interaction(c, "U-ADA", "hold ada");
    expect((await post("steer", ada)).body).toEqual(DEFERRED);
    await runOf("steer", ada);
    // Bob's private press, while Ada's public run is busy: not added to her answer, which the whole channel sees.
    const bob = interaction(c, "U-BOB", "secret plan", true);
    expect((await post("steer", bob)).body).toEqual(DEFERRED_PRIVATELY);
    // Cara's public message still joins Ada's public answer.
    const cara = interaction(c, "U-CARA", "public follow-up");
    expect((await post("steer", cara)).body).toEqual(ADDED);
    gate("ada").resolve();
    expect(await answered(ada)).toBe("re: hold ada + public follow-up");
    expect(await answered(bob)).toBe("re: secret plan");
    // Bob's answer went out through his own interaction only: its deferred response, ephemeral.
    expect(fake.calls.filter((call) => JSON.stringify(call.body ?? {}).includes("secret plan")).every((call) => call.path.includes(bob.token))).toBe(true);

    // The other way round: Bob's private run busy, Ada's public message is not pulled into it; Bob's own next press is.
    const bobHeld = interaction(c, "U-BOB", "hold bob", true);
    expect((await post("steer", bobHeld)).body).toEqual(DEFERRED_PRIVATELY);
    await runOf("steer", bobHeld);
    const adaAgain = interaction(c, "U-ADA", "after the private one");
    expect((await post("steer", adaAgain)).body).toEqual(DEFERRED);
    const bobMore = interaction(c, "U-BOB", "more secrets", true);
    expect((await post("steer", bobMore)).body).toEqual(ADDED);
    gate("bob").resolve();
    expect(await answered(bobHeld)).toBe("re: hold bob + more secrets");
    expect(await answered(adaAgain)).toBe("re: after the private one");
    expect(shownFor(adaAgain).every((s) => s.flags === undefined)).toBe(true);
  });

  it("an app installed only to its user answers that user alone: another user's message is not pulled into its run, the same user's is", async () => {
    const c = "C-APPS";
    const ada = interaction(c, "U-ADA", "hold ada-app", "user app");
    expect((await post("steer", ada)).body).toEqual(DEFERRED);
    await runOf("steer", ada);
    // Once Ada's interaction token expired, her answer would continue in her DMs: never with Bob's question in it.
    const bob = interaction(c, "U-BOB", "bob asks his app", "user app");
    expect((await post("steer", bob)).body).toEqual(DEFERRED);
    const adaMore = interaction(c, "U-ADA", "ada adds", "user app");
    expect((await post("steer", adaMore)).body).toEqual(ADDED);
    gate("ada-app").resolve();
    expect(await answered(ada)).toBe("re: hold ada-app + ada adds");
    expect(await answered(bob)).toBe("re: bob asks his app");
  });

  it("a run answering others reads nothing of a private press: not its words, its answer or its records, in history.page, history.search, event.page or event.get; its own user's private run does, told in ctx.metadata.private_audience", async () => {
    const c = "C-READ";
    const secret = interaction(c, "U-BOB", "secret recipe", true);
    await post("steer", secret);
    expect(await answered(secret)).toBe("re: secret recipe");
    const secretRun = await runOf("steer", secret);
    await host.waitForRun(secretRun);
    const secretId = eventIdOf("steer", secret);
    const said = (r: { history: string[]; search: string[] }) => [...r.history, ...r.search].filter((t) => t.includes("secret"));
    const names = (events: any[]) => events.filter((e) => e.event_id === secretId || JSON.stringify(e.metadata).includes(secretRun) || String(e.input_summary ?? "").includes("secret"));

    // Ada's public run, and Dan's private one (another user's eyes), read none of it.
    for (const [user, ephemeral] of [["U-ADA", false], ["U-DAN", true]] as const) {
      const seen = await readAs(c, user, secretId, ephemeral);
      expect({ said: said(seen), events: names(seen.events), get: seen.get, audience: seen.audience }).toEqual({ said: [], events: [], get: { status: 403, code: "unauthorized" }, audience: ephemeral ? `discord_ephemeral:${user}` : undefined });
      // The public history is there all the same.
      expect(seen.history.length).toBeGreaterThan(0);
    }

    // Bob's own private run reads his words and their answer.
    const mine = await readAs(c, "U-BOB", secretId, true);
    expect({ said: said(mine).sort(), get: mine.get.status, event: names(mine.events).some((e) => e.event_id === secretId), audience: mine.audience }).toEqual({
      said: ["re: secret recipe", "re: secret recipe", "secret recipe", "secret recipe"],
      get: 200,
      event: true,
      audience: "discord_ephemeral:U-BOB",
    });
  });

  it("a private press that came while the bot was paused (recorded with its words, nothing run) stays its user's: a public run after the pause reads none of it", async () => {
    const c = "C-PAUSED";
    const pause = (enabled: boolean) => host.admin("PUT", `/v1/admin/bots/${bots.steer.botId}`, { api_base_url: fake.url, enabled });
    expect((await pause(false)).status).toBe(200);
    const secret = interaction(c, "U-BOB", "secret while paused", true);
    expect((await post("steer", secret)).status).toBe(200);
    const secretId = eventIdOf("steer", secret);
    expect((await host.admin("GET", `/v1/events/${secretId}`)).body).toMatchObject({ disposition: "bot_disabled", metadata: { private_audience: "discord_ephemeral:U-BOB" } });
    expect((await pause(true)).status).toBe(200);

    const seen = await readAs(c, "U-ADA", secretId, false);
    expect({ events: seen.events.filter((e) => e.event_id === secretId || JSON.stringify(e).includes("secret while paused")), get: seen.get }).toEqual({ events: [], get: { status: 403, code: "unauthorized" } });
    // Bob's own private run after the pause reads it.
    const mine = await readAs(c, "U-BOB", secretId, true);
    expect({ event: mine.events.some((e) => e.event_id === secretId), get: mine.get.status }).toEqual({ event: true, get: 200 });
  });

  it("under interrupt, a private press never cancels a public answer in progress, nor a public message a private one; a public message still cancels a public one", async () => {
    const c = "C-INTERRUPT";
    const ada = interaction(c, "U-ADA", "hold ada-i");
    await post("interrupt", ada);
    const adaRun = await runOf("interrupt", ada);
    const bob = interaction(c, "U-BOB", "private question", true);
    expect((await post("interrupt", bob)).body).toEqual(DEFERRED_PRIVATELY);
    await new Promise((r) => setTimeout(r, 300));
    gate("ada-i").resolve();
    expect((await host.waitForRun(adaRun)).status).toBe("completed");
    expect(await answered(bob)).toBe("re: private question");

    const bobHeld = interaction(c, "U-BOB", "hold bob-i", true);
    await post("interrupt", bobHeld);
    const bobRun = await runOf("interrupt", bobHeld);
    const cara = interaction(c, "U-CARA", "hold cara-i");
    expect((await post("interrupt", cara)).body).toEqual(DEFERRED);
    await new Promise((r) => setTimeout(r, 300));
    gate("bob-i").resolve();
    expect((await host.waitForRun(bobRun)).status).toBe("completed");
    const caraRun = await runOf("interrupt", cara);
    // Among the answers the channel sees, interrupt is per conversation: Dan's newer question makes Cara's moot.
    const dan = interaction(c, "U-DAN", "newer public question");
    await post("interrupt", dan);
    expect((await host.waitForRun(caraRun)).status).toBe("cancelled");
    gate("cara-i").resolve();
    expect(await answered(dan)).toBe("re: newer public question");
  });
});
