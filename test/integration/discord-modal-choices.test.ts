import type { KeyObject } from "node:crypto";
import { discordKeyPair, postInteraction } from "../support/discord-signing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startChatRunner, startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";

/**
 * Discord's modals take Radio Groups (type 21), Checkbox Groups (22) and Checkboxes (23) in Labels. Their submit
 * reports a Checkbox as `{type: 23, custom_id, value: true|false}` and a Radio Group left unpicked as
 * `{type: 21, custom_id, value: null}` (discord-api-types APIModalSubmitCheckboxComponent,
 * APIModalSubmitRadioGroupComponent). README: "A modal submit's input is its fields' values". A form with one of
 * them must still run with what the user typed, not be answered "This interaction is not supported".
 */
const APPLICATION_ID = "1122334455667799";
const BOT_TOKEN = "discord-bot-token-SECRET-modal-0123";
let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let privateKey: KeyObject;
let webhookUrl: string;
let botId: string;

const discordApi = (call: PlatformCall): FakeReply => (call.method === "PATCH" ? { json: { id: "original_msg" } } : { json: { id: "followup" } });

beforeAll(async () => {
  const keys = discordKeyPair();
  privateKey = keys.privateKey;
  const publicKeyHex = keys.publicKeyHex;
  fake = await startFakePlatform(discordApi);
  runner = await startChatRunner("discord-modal");
  host = await startTestHost();
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "discord", api_base_url: fake.url, credentials: { application_id: APPLICATION_ID, public_key: publicKeyHex, bot_token: BOT_TOKEN } });
  expect(created.status).toBe(201);
  botId = created.body.bot_id;
  webhookUrl = created.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "discord-modal-agent", scope: { type: "bot", id: botId } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

const post = (interaction: unknown) => postInteraction(webhookUrl, privateKey, interaction);

let seq = 0;
const modalSubmit = (components: unknown[], resolved?: unknown) => {
  const id = `8${String(++seq).padStart(17, "0")}`;
  return {
    id,
    application_id: APPLICATION_ID,
    type: 5,
    token: `interaction-token-${id}-secret`,
    version: 1,
    guild_id: "G1",
    channel_id: "C1",
    channel: { id: "C1", type: 0 },
    member: { user: { id: "U42", username: "ada", global_name: "Ada" } },
    data: { custom_id: "bug_report", components, ...(resolved ? { resolved } : {}) },
  };
};

describe("Discord: a modal submit with a checkbox or radio group", () => {
  it("runs with the text the user typed, and keeps each field's value", async () => {
    const i = modalSubmit([
      { type: 18, id: 1, component: { type: 4, id: 2, custom_id: "title", value: "Login broken on Safari" } },
      { type: 18, id: 3, component: { type: 23, id: 4, custom_id: "urgent", value: true } },
      { type: 18, id: 5, component: { type: 21, id: 6, custom_id: "area", value: null } },
      { type: 18, id: 7, component: { type: 22, id: 8, custom_id: "platforms", values: ["web", "ios"] } },
    ]);
    const res = await post(i);
    expect(res.status).toBe(200);
    // Deferred ("thinking…"), as any interaction that runs: not the "not supported" notice.
    expect(res.body).toEqual({ type: 5 });
    const [row] = await host.query<{ event_type: string }>("SELECT event_type FROM event_log WHERE event_id = ?", [`discord:${botId}:${i.id}`]);
    expect(row?.event_type).toBe("message.received");
    const ctx = await waitFor(() => runner.contexts.find((c) => c.event.event_id === `discord:${botId}:${i.id}`), 10_000, "the modal's run");
    expect(ctx.input.text).toContain("Login broken on Safari");
    expect(ctx.event.data.modal.fields).toMatchObject({ title: "Login broken on Safari", urgent: true, area: null });
  });

  it("names the users and channels a select picked, as the server shows them, and keeps their ids in the fields", async () => {
    const i = modalSubmit(
      [
        { type: 18, id: 1, component: { type: 4, id: 2, custom_id: "title", value: "Checkout fails" } },
        { type: 18, id: 3, component: { type: 5, id: 4, custom_id: "owner", values: ["222"] } },
        { type: 18, id: 5, component: { type: 8, id: 6, custom_id: "where", values: ["555"] } },
      ],
      { users: { "222": { id: "222", username: "bob", global_name: "Bob" } }, members: { "222": { nick: "Bobby" } }, channels: { "555": { id: "555", name: "bugs", type: 0 } } },
    );
    expect((await post(i)).body).toEqual({ type: 5 });
    const ctx = await waitFor(() => runner.contexts.find((c) => c.event.event_id === `discord:${botId}:${i.id}`), 10_000, "the modal's run");
    expect(ctx.input.text).toBe("Checkout fails\n@Bobby\n#bugs");
    expect(ctx.event.data.modal.fields).toEqual({ title: "Checkout fails", owner: "222", where: "555" });
  });
});
