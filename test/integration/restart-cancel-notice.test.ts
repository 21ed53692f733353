import { generateKeyPairSync, sign as edSign, type KeyObject } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalHost } from "../../local/host";
import { adminCall, bindRunner } from "../../local/setup";
import { startHostOn } from "../support/host";
import { deferred } from "../support/host-api";
import { startFakePlatform, waitFor, type PlatformCall } from "../support/fake-platform";
import { startHoldingRunner, useDataDir } from "../support/restart-host";

/**
 * README: on Discord a run the host cancelled still resolves its deferred "thinking…" response, and a chat reply on
 * its way (a rate limit being waited out) when the instance dies is sent by the next one. An operator's cancel of a
 * queued interaction whose notice waits out a 429 when the host restarts must still resolve the placeholder.
 */
const APPLICATION_ID = "1122334455667788";
const BOT_TOKEN = "discord-bot-token-SECRET-restart-0123";
const dataDir = useDataDir("agent-host-restart-cancel-");
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startHoldingRunner>>;
let privateKey: KeyObject;
let publicKeyHex: string;
const never = deferred();
const throttled = new Set<string>();
const start = () => startHostOn(dataDir.path, { RUN_WATCHDOG_INTERVAL_MS: "1000" });

beforeAll(async () => {
  const pair = generateKeyPairSync("ed25519");
  privateKey = pair.privateKey;
  publicKeyHex = pair.publicKey.export({ type: "spki", format: "der" }).subarray(-32).toString("hex");
  fake = await startFakePlatform((call: PlatformCall) => {
    const m = /^\/webhooks\/([^/]+)\/([^/]+)(?:\/messages\/(.+))?$/.exec(call.path);
    if (!m || m[1] !== APPLICATION_ID) return { status: 404, json: { message: "Unknown Webhook", code: 10015 } };
    if (throttled.delete(m[2])) return { status: 429, headers: { "retry-after": "5" }, json: { message: "You are being rate limited.", retry_after: 5, global: false } };
    if (call.method === "PATCH") return { json: { id: "original_msg", content: call.body?.content } };
    if (call.method === "POST") return { json: { id: "followup", content: call.body?.content } };
    return { status: 405, json: { message: "405", code: 0 } };
  });
  runner = await startHoldingRunner("rcancel", never.promise);
});
afterAll(async () => {
  never.resolve();
  await runner?.close();
  await fake?.close();
});

let seq = 0;
function command(question: string) {
  const id = `8${String(++seq).padStart(17, "0")}`;
  return {
    id, application_id: APPLICATION_ID, type: 2, token: `itoken-${id}`, version: 1, guild_id: "G1", channel_id: "C9", channel: { id: "C9", type: 0 },
    member: { user: { id: "U42", username: "ada", global_name: "Ada" } },
    data: { id: "cmd1", name: "ask", type: 1, options: [{ name: "question", type: 3, value: question }] },
  };
}
async function post(url: string, interaction: unknown) {
  const body = JSON.stringify(interaction);
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = edSign(null, Buffer.from(timestamp + body), privateKey).toString("hex");
  return fetch(url, { method: "POST", headers: { "content-type": "application/json", "x-signature-timestamp": timestamp, "x-signature-ed25519": signature }, body });
}
const writesFor = (token: string) => fake.calls.filter((c) => c.path.startsWith(`/webhooks/${APPLICATION_ID}/${token}`) && c.reply?.status === undefined);

describe("Discord: the notice of a queued run an operator cancelled, across a restart", () => {
  it("still resolves the deferred response after the host restarts while the notice waits out a 429", async () => {
    let host: LocalHost = await start();
    try {
      const created = await adminCall<{ bot_id: string; webhook_url: string }>(host, "POST", "/v1/admin/bots", { platform: "discord", api_base_url: fake.url, credentials: { application_id: APPLICATION_ID, public_key: publicKeyHex, bot_token: BOT_TOKEN } });
      expect(created.status).toBe(201);
      const webhook = () => `${host.url}${new URL(created.body.webhook_url).pathname}`;
      await bindRunner(host, { baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "rcancel", scope: { type: "bot", id: created.body.bot_id } });
      expect((await post(webhook(), command("hold on"))).status).toBe(200);
      await waitFor(() => runner.calls.length > 0, 10_000, "the held run");
      const queued = command("queued one");
      expect((await post(webhook(), queued)).status).toBe(200);
      const [{ run_id: runId }] = await waitFor(async () => {
        const rows = await host.query<{ run_id: string }>("SELECT run_id FROM event_log WHERE source = 'discord' AND input_summary LIKE '%queued one%'");
        return rows.length ? rows : undefined;
      }, 10_000, "the queued run");
      throttled.add(queued.token);
      expect((await adminCall(host, "POST", `/v1/runs/${runId}/cancel`)).status).toBe(202);
      await waitFor(() => fake.calls.some((c) => c.path.startsWith(`/webhooks/${APPLICATION_ID}/${queued.token}`)), 10_000, "the notice's first attempt");
      await host.dispose();
      host = await start();
      await waitFor(() => writesFor(queued.token).length > 0, 10_000, "the notice after the restart").catch(() => undefined);
      expect(writesFor(queued.token).map((c) => c.body?.content)).toEqual(["(This answer was cancelled.)"]);
    } finally {
      await host.dispose();
    }
  }, 40_000);
});
