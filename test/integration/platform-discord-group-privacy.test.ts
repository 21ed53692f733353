import type { KeyObject } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { discordKeyPair, postInteraction } from "../support/discord-signing";
import { startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { startFakeProvider } from "../support/fake-provider";
import { callHostApi, deferred, uploadArtifact } from "../support/host-api";
import { readConversation, type ConversationReads } from "../support/conversation-reads";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent, runLedger } from "../support/scripted-runner";

/**
 * Several users in one Discord channel share its conversation; a press on an ephemeral message is its user's alone
 * (README "Who sees what in a group chat"). Through the real signed webhook: such a press is never pulled by another
 * user's run nor pulls a public message into its own, neither cancels the other's answer under `interrupt`, and runs
 * answering anyone else read nothing of it (its words, its answer, its records) in history or events, nor its files.
 */
const APPLICATION_ID = "5566778899001122";
const BOT_TOKEN = "discord-bot-token-PRIVACY-0123456789";
let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let provider: Awaited<ReturnType<typeof startFakeProvider>>;
let privateKey: KeyObject;
const bots: Record<"steer" | "interrupt", { botId: string; webhookUrl: string }> = {} as never;
const gates = new Map<string, ReturnType<typeof deferred<void>>>();
const gate = (tag: string) => gates.get(tag) ?? gates.set(tag, deferred()).get(tag)!;
/** Each run as its runner began it (its event and input's text), and what a `read` run found, by run id. */
const begun: { runId: string; eventId: string; text: string; metadata: Record<string, unknown> }[] = [];
const reads = new Map<string, ConversationReads>();
/** A private file Bob sends with his question, and one his private run makes; a public run's own file. */
const [SENT, MADE, PUBLIC] = ["secret sent by bob", "secret made for bob", "made for everyone"].map((t) => Buffer.from(t));
const MODEL_KEY = "sk-privacy-0123456789abcdef";
/** What a `keep` run stored (its input's files, the file it made), and what a `probe` run read of each id, by run id. */
const kept = new Map<string, { sent: string; made: string }>();
const probes = new Map<string, { own: string; seen: Record<string, { read: [number, string?]; metadata: number; model: number }> }>();

let ids = 0;
function discordApi(call: PlatformCall): FakeReply {
  const m = /^\/webhooks\/([^/]+)\/([^/]+)(?:\/messages\/(.+))?$/.exec(call.path);
  if (call.path === "/cdn/attachments/secret.txt") return { bytes: SENT, headers: { "content-type": "text/plain" } };
  if (!m || m[1] !== APPLICATION_ID) return { status: 403, json: { message: "Missing Access", code: 50001 } };
  if (call.method === "PATCH") return { json: { id: m[3] === "@original" ? `original_${m[2].slice(-12)}` : m[3] } };
  return { json: { id: `followup_${++ids}` } };
}

beforeAll(async () => {
  const keys = discordKeyPair();
  privateKey = keys.privateKey;
  fake = await startFakePlatform(discordApi);
  provider = await startFakeProvider({ keys: { "gpt-files": MODEL_KEY } });
  runner = await startAdHocRunner({
    name: "discord-group",
    runners: [
      {
        name: "default",
        label: { en_US: "g" },
        capabilities: { streaming: true, steering: true },
        permissions: { history: ["page", "search"], events: ["get", "page"], artifacts: ["metadata", "read"], models: ["invoke"] },
      },
    ],
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
      const upload = (bytes: Buffer, name: string) => uploadArtifact(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, bytes, { name, mime_type: "text/plain" });
      // `keep`: the run keeps its input's file and makes one of its own.
      if (text === "keep") {
        kept.set(ctx.run_id, { sent: ctx.input.attachments[0].artifact_id, made: (await upload(MADE, "made.txt")).body.data.artifact_id });
        return w.reply("kept");
      }
      // `probe <id>,<id>`: the run makes a file of its own, reads each id every way a runner can, then names each in its answer.
      if (text.startsWith("probe ")) {
        const ids = text.slice("probe ".length).split(",");
        const own = (await upload(PUBLIC, "public.txt")).body.data.artifact_id;
        const seen: Record<string, { read: [number, string?]; metadata: number; model: number }> = {};
        for (const id of ids) {
          const read = await api("artifact.read", { artifact_id: id });
          const model = await api("model.invoke", { model_id: "files", messages: [{ role: "user", content: [{ type: "text", text: "what is it?" }, { type: "file", artifact_id: id }] }] });
          const body = read.status === 200 ? Buffer.from(read.body.data.content_base64, "base64").toString() : read.body.error?.code;
          seen[id] = { read: [read.status, body], metadata: (await api("artifact.metadata", { artifact_id: id })).status, model: model.status };
          w.send("artifact.created", { artifact_id: id, artifact_type: "file" });
        }
        probes.set(ctx.run_id, { own, seen });
        return w.reply([{ type: "text", text: "probed" }, ...ids.map((id) => ({ type: "file", artifact_id: id }))]);
      }
      if (text.startsWith("hold ")) await gate(text.slice("hold ".length)).promise;
      const pulled = ctx.context.available_apis.steering_pull ? (await api("steering.pull", { mode: "all" })).body.data.items.map((i: any) => i.input.text) : [];
      w.reply(`re: ${[text, ...pulled].join(" + ")}`);
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/models", { model_id: "files", name: "files", kind: "llm", base_url: provider.baseUrl, api_key: MODEL_KEY, model: "gpt-files" })).status).toBe(201);
  for (const [name, concurrency] of [["steer", {}], ["interrupt", { strategy: "interrupt" }]] as const) {
    const created = await host.admin("POST", "/v1/admin/bots", { platform: "discord", api_base_url: fake.url, credentials: { application_id: APPLICATION_ID, public_key: keys.publicKeyHex, bot_token: BOT_TOKEN } });
    expect(created.status).toBe(201);
    bots[name] = { botId: created.body.bot_id, webhookUrl: created.body.webhook_url };
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: `group-${name}`, scope: { type: "bot", id: created.body.bot_id } });
    await putAgent(host, { agent_id: `group-${name}`, runner_id: runner.runnerId(), scope: { type: "bot", id: created.body.bot_id }, concurrency, resource_policy: { models: ["files"] } });
  }
});
afterAll(async () => {
  for (const g of gates.values()) g.resolve();
  await host?.dispose();
  await runner?.close();
  await fake?.close();
  await provider?.close();
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

/** The interaction with a file attached to it (a slash command's attachment option), as Discord sends one. */
function withFile(i: Interaction): Interaction {
  const data = i.data as { options: unknown[] };
  const file = { id: "A9", filename: "secret.txt", content_type: "text/plain", url: `${fake.url}/cdn/attachments/secret.txt` };
  // A slash command's data with one option more: not a shape `interaction` builds, hence the cast.
  return { ...i, data: { ...data, options: [...data.options, { name: "file", type: 11, value: "A9" }], resolved: { attachments: { A9: file } } } } as unknown as Interaction;
}

/** A `probe` of `ids` by `user`'s interaction in `channel`: what its run read, attached and had posted on its interaction's token. */
async function probeAs(channel: string, user: string, ids: string[], ephemeral: boolean | "user app") {
  const i = interaction(channel, user, `probe ${ids.join(",")}`, ephemeral);
  await post("steer", i);
  const runId = await runOf("steer", i);
  await host.waitForRun(runId);
  await waitFor(async () => (await host.query("SELECT 1 FROM event_log WHERE run_id = ? AND event_type = 'delivery.succeeded'", [runId])).length > 0, 15_000, "the probe's answer");
  // Its files, if any were to go, follow its text.
  await new Promise((r) => setTimeout(r, 1000));
  const [item] = await host.query<{ artifact_refs_json: string }>("SELECT artifact_refs_json FROM transcript WHERE run_id = ? AND role = 'assistant'", [runId]);
  const drops = (await runLedger(host, runId)).filter((e) => e.origin === "host" && String(e.data?.message ?? "").includes("private to another user")).length;
  const posted = fake.calls.filter((call) => call.path.includes(i.token)).map((call) => call.bytes.toString());
  return { ...probes.get(runId)!, refs: JSON.parse(item.artifact_refs_json).map((r: any) => r.artifact_id), drops, posted };
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

  it("a run answering others reads none of a private event's files nor those its run made (artifact.read, artifact.metadata, a model call: 403 as event.get), nor attaches or posts them; their user's own private run reads them, and the public ones", async () => {
    const c = "C-FILES";
    // Bob asks his own app (his eyes alone) with a file, and his run makes one.
    const keep = withFile(interaction(c, "U-BOB", "keep", "user app"));
    await post("steer", keep);
    const keepRun = await runOf("steer", keep);
    await host.waitForRun(keepRun);
    const { sent, made } = kept.get(keepRun)!;
    const refused = { read: [403, "unauthorized"], metadata: 403, model: 403 };
    const secrets = (posted: string[]) => posted.filter((b) => b.includes("secret"));

    // Ada's public run, and Dan's private one (other eyes), read neither, and their answers carry neither.
    const publicOwn: string[] = [];
    for (const [user, ephemeral] of [["U-ADA", false], ["U-DAN", true]] as const) {
      const seen = await probeAs(c, user, [sent, made], ephemeral);
      expect({ seen: seen.seen, refs: seen.refs, drops: seen.drops, posted: secrets(seen.posted) }).toEqual({ seen: { [sent]: refused, [made]: refused }, refs: [], drops: 2, posted: [] });
      if (!ephemeral) publicOwn.push(seen.own);
    }

    // Bob's own private run reads both, and the public run's file; its answer carries them all.
    const mine = await probeAs(c, "U-BOB", [sent, made, publicOwn[0]], "user app");
    const read = (text: Buffer) => ({ read: [200, text.toString()], metadata: 200, model: 200 });
    expect({ seen: mine.seen, refs: mine.refs, drops: mine.drops }).toEqual({ seen: { [sent]: read(SENT), [made]: read(MADE), [publicOwn[0]]: read(PUBLIC) }, refs: [sent, made, publicOwn[0]], drops: 0 });
    expect(secrets(mine.posted).length).toBeGreaterThan(0);

    // An operator's event that re-uses Bob's file gives it to its run (operators see everything); not his run's own file.
    const given = await host.postEvent({ ...messageEvent(c, `probe ${sent},${made}`), bot_id: bots.steer.botId, input: { text: `probe ${sent},${made}`, attachments: [{ artifact_id: sent }] } });
    expect([given.status, given.body.error]).toEqual([202, undefined]);
    await host.waitForRun(given.body.run_id!);
    expect(probes.get(given.body.run_id!)!.seen).toEqual({ [sent]: read(SENT), [made]: refused });
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
