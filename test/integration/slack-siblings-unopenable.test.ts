import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalHost } from "../../local/host";
import { adminCall } from "../../local/setup";
import { startHostOn } from "../support/host";
import { postToSlackBot } from "../support/slack-signed";
import { startFakePlatform, type FakeReply, type PlatformCall } from "../support/fake-platform";

/**
 * Slack siblings whose stored credentials the host cannot open (sealed under a SECRETS_KEY it no longer has), on one
 * data folder across key changes. Each lookup digests a bounded batch of the rows not digested yet
 * (src/stores/bot-siblings.ts): rows it cannot open must not fill that batch for good, nor be lost once the key is back.
 */
const KEY_A = Buffer.alloc(32, 0xa1).toString("base64");
const KEY_B = Buffer.alloc(32, 0xb2).toString("base64");
const APP_SECRET = "unopenable-app-secret-0123456789";
/** More than one lookup digests (20). */
const LOST = 21;
const lostTeam = (i: number) => `TL${String(i).padStart(2, "0")}`;
const token = (team: string) => `xoxb-${team.toLowerCase()}-token-0123456789`;

let dataDir: string;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;

function slackApi(call: PlatformCall): FakeReply {
  const team = /^Bearer xoxb-(\w+)-token-/.exec(String(call.headers.authorization ?? ""))?.[1]?.toUpperCase();
  if (call.path === "/auth.test" && team) return { json: { ok: true, url: "https://example.slack.com/", team: "Example", user: "agent", team_id: team, user_id: `U-${team}`, is_enterprise_install: false } };
  return { status: 404, json: { ok: false, error: "unknown_method" } };
}

async function withHost(vars: Record<string, string>, use: (host: LocalHost) => Promise<void>) {
  const host = await startHostOn(dataDir, vars);
  try {
    await use(host);
  } finally {
    await host.dispose();
  }
}

/** Registered, then as the release before 0031 left it (or the previous Worker's PUT): not digested. */
async function registerUndigested(host: LocalHost, botId: string, team: string) {
  const created = await adminCall(host, "POST", "/v1/admin/bots", { bot_id: botId, platform: "slack", api_base_url: fake.url, credentials: { bot_token: token(team), signing_secret: APP_SECRET } });
  expect(created.status).toBe(201);
  await host.query("UPDATE bot SET app_secret_digest = NULL WHERE bot_id = ?", [botId]);
}

let n = 0;
/** A message from workspace `team`, signed as Slack signs the app's requests, sent to the app's one Request URL (slack-hub's). */
async function sendFrom(host: LocalHost, team: string) {
  const event = { type: "message", channel: `C-${team}`, channel_type: "channel", user: "U42", text: `hello from ${team}`, ts: `${1_700_000_000 + ++n}.000100`, team };
  const authorizations = [{ enterprise_id: null, team_id: team, user_id: `U-${team}`, is_bot: true, is_enterprise_install: false }];
  const body = JSON.stringify({ token: "legacy", team_id: team, api_app_id: "A1", type: "event_callback", event_id: `EvUnopenable${team}`, event_time: Math.floor(Date.now() / 1000), authorizations, event });
  return (await postToSlackBot(host.url, "slack-hub", body, { secret: APP_SECRET })).status;
}
const recordedFor = (host: LocalHost, botId: string) => host.query<{ event_id: string }>("SELECT event_id FROM event_log WHERE bot_id = ?", [botId]);

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "slack-unopenable-"));
  fake = await startFakePlatform(slackApi);
  // Sealed under KEY_A, which the host then loses.
  await withHost({ SECRETS_KEY: KEY_A }, async (host) => {
    for (let i = 0; i < LOST; i++) await registerUndigested(host, `slack-lost-${i}`, lostTeam(i));
  });
});
afterAll(async () => {
  await fake?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe("Slack siblings whose credentials cannot be opened", () => {
  it("hold no later sibling back: a request for one registered after 21 of them is taken the second time Slack sends it", async () => {
    await withHost({ SECRETS_KEY: KEY_B }, async (host) => {
      expect((await adminCall(host, "POST", "/v1/admin/bots", { bot_id: "slack-hub", platform: "slack", api_base_url: fake.url, credentials: { bot_token: token("T1"), signing_secret: APP_SECRET } })).status).toBe(201);
      await registerUndigested(host, "slack-late", "TLATE");
      // The first lookup meets 20 of them (the most one opens), and more are left.
      expect(await sendFrom(host, "TLATE")).toBe(503);
      expect(await sendFrom(host, "TLATE")).toBe(200);
      expect(await recordedFor(host, "slack-late")).toHaveLength(1);
      // Kept as unopenable, not digested: never found, never opened again under these keys.
      const kept = await host.query<{ digest: string }>("SELECT app_secret_digest AS digest FROM bot WHERE bot_id LIKE 'slack-lost-%'");
      expect(kept.map((r) => r.digest.startsWith("unopenable:"))).toEqual(Array(LOST).fill(true));
    });
  });

  it("are found again once the key that opens them is back (SECRETS_KEY_PREVIOUS), their credentials unchanged", async () => {
    await withHost({ SECRETS_KEY: KEY_B, SECRETS_KEY_PREVIOUS: KEY_A }, async (host) => {
      expect(await sendFrom(host, lostTeam(0))).toBe(200);
      expect(await recordedFor(host, "slack-lost-0")).toHaveLength(1);
    });
  });
});
