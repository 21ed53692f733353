import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { discordKeyPair, postInteraction } from "../support/discord-signing";
import { startFakePlatform, waitFor, type PlatformCall } from "../support/fake-platform";
import { startTestHost, type TestHost } from "../support/host";
import { deferred } from "../support/host-api";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README (Delivery): on Discord a run the host cancelled before it started still resolves its deferred "thinking…"
 * response. Here the database applies the cancel's end write but its answer never reaches the Worker (past
 * DB_QUERY_TIMEOUT_MS): whatever next finds the run ended (its start, or the operator's cancel sent again) still owes
 * that notice, and it is sent once.
 */
const APPLICATION_ID = "1122334455667788";
const BOT_TOKEN = "discord-bot-token-SECRET-cancel-unanswered";
const key = discordKeyPair();
/** Each channel's busy run, held until its test lets it end. */
const holds = new Map<string, ReturnType<typeof deferred<void>>>();
let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let webhookUrl: string;
const heard: string[] = [];

beforeAll(async () => {
  fake = await startFakePlatform((call: PlatformCall) => {
    const m = /^\/webhooks\/([^/]+)\/([^/]+)(?:\/messages\/(.+))?$/.exec(call.path);
    if (!m || m[1] !== APPLICATION_ID) return { status: 404, json: { message: "Unknown Webhook", code: 10015 } };
    if (call.method === "PATCH") return { json: { id: "original_msg", content: call.body?.content } };
    return { json: { id: "followup", content: call.body?.content } };
  });
  runner = await startAdHocRunner({
    name: "cancel-unanswered",
    async onRun({ body }, res) {
      const ctx = body.context;
      heard.push(ctx.input.text);
      const w = resultWriter(res, ctx.run_id);
      await holds.get(ctx.input.text)?.promise;
      w.reply(`done: ${ctx.input.text}`);
    },
  });
  host = await startTestHost({ vars: { DB_QUERY_TIMEOUT_MS: "1000" } });
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "discord", api_base_url: fake.url, credentials: { application_id: APPLICATION_ID, public_key: key.publicKeyHex, bot_token: BOT_TOKEN } });
  expect(created.status).toBe(201);
  webhookUrl = created.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "cancel-unanswered", scope: { type: "bot", id: created.body.bot_id } });
});
afterAll(async () => {
  for (const h of holds.values()) h.resolve();
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

let seq = 0;
function command(channel: string, question: string) {
  const id = `9${String(++seq).padStart(17, "0")}`;
  return {
    id, application_id: APPLICATION_ID, type: 2, token: `itoken-${id}`, version: 1, guild_id: "G1", channel_id: channel, channel: { id: channel, type: 0 },
    member: { user: { id: "U42", username: "ada", global_name: "Ada" } },
    data: { id: "cmd1", name: "ask", type: 1, options: [{ name: "question", type: 3, value: question }] },
  };
}
const writesFor = (token: string) => fake.calls.filter((c) => c.path.startsWith(`/webhooks/${APPLICATION_ID}/${token}`)).map((c) => [c.method, c.body?.content]);

describe("Discord: the notice of a queued run whose cancel's write was applied unanswered", () => {
  it.each(["its start", "the cancel sent again"])("is sent once, by %s", async (finder) => {
    const channel = finder === "its start" ? "C1" : "C2";
    holds.set(`hold ${channel}`, deferred());
    const busy = command(channel, `hold ${channel}`);
    expect((await postInteraction(webhookUrl, key.privateKey, busy)).body).toEqual({ type: 5 });
    await waitFor(() => heard.includes(`hold ${channel}`), 10_000, "the busy run");
    const waiting = command(channel, `waiting ${channel}`);
    expect((await postInteraction(webhookUrl, key.privateKey, waiting)).body).toEqual({ type: 5 });
    const [queued] = (await host.admin("GET", `/v1/runs?conversation_id=${channel}&status=created`)).body.items;
    // The end write is applied; its answer comes after the Worker stopped waiting for it.
    host.databaseOutage({ answerDelayMs: 2_500, matching: "run cancelled before it started" });
    expect((await host.admin("POST", `/v1/runs/${queued.run_id}/cancel`)).status).toBeGreaterThanOrEqual(500);
    expect((await host.waitForRun(queued.run_id)).status).toBe("cancelled");
    if (finder === "the cancel sent again") expect((await host.admin("POST", `/v1/runs/${queued.run_id}/cancel`)).status).toBe(409);
    else holds.get(`hold ${channel}`)!.resolve();
    await waitFor(() => writesFor(waiting.token).length > 0, 10_000, "the waiting interaction resolved").catch(() => undefined);
    await new Promise((r) => setTimeout(r, 500));
    expect(writesFor(waiting.token)).toEqual([["PATCH", "(This answer was cancelled.)"]]);
    expect(heard).not.toContain(`waiting ${channel}`);
  }, 40_000);
});
