import { discordKeyPair, postInteraction } from "../support/discord-signing";
import { describe, expect, it } from "vitest";
import { useChatHost } from "../support/chat-host";
import { waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";

/**
 * Discord's modals take Radio Groups (type 21), Checkbox Groups (22) and Checkboxes (23) in Labels. Their submit
 * reports a Checkbox as `{type: 23, custom_id, value: true|false}` and a Radio Group left unpicked as
 * `{type: 21, custom_id, value: null}` (discord-api-types APIModalSubmitCheckboxComponent,
 * APIModalSubmitRadioGroupComponent). README: "A modal submit's input is its fields' values". A form with one of
 * them must still run with what the user typed, not be answered "This interaction is not supported".
 */
const APPLICATION_ID = "1122334455667799";
const BOT_TOKEN = "discord-bot-token-SECRET-modal-0123";
const { privateKey, publicKeyHex } = discordKeyPair();

const discordApi = (call: PlatformCall): FakeReply => (call.method === "PATCH" ? { json: { id: "original_msg" } } : { json: { id: "followup" } });

const chat = useChatHost({
  api: discordApi,
  runnerName: "discord-modal",
  hostOptions: { captureLogs: false },
  async ready() {
    const credentials = { application_id: APPLICATION_ID, public_key: publicKeyHex, bot_token: BOT_TOKEN };
    await chat.addBot({ platform: "discord", api_base_url: chat.fake.url, credentials }, { agentId: "discord-modal-agent" });
  },
});

const post = (interaction: unknown) => postInteraction(chat.webhookUrl, privateKey, interaction);

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
    const [row] = await chat.host.query<{ event_type: string }>("SELECT event_type FROM event_log WHERE event_id = ?", [`discord:${chat.botId}:${i.id}`]);
    expect(row?.event_type).toBe("message.received");
    const ctx = await waitFor(() => chat.runner.contexts.find((c) => c.event.event_id === `discord:${chat.botId}:${i.id}`), 10_000, "the modal's run");
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
    const ctx = await waitFor(() => chat.runner.contexts.find((c) => c.event.event_id === `discord:${chat.botId}:${i.id}`), 10_000, "the modal's run");
    expect(ctx.input.text).toBe("Checkout fails\n@Bobby\n#bugs");
    expect(ctx.event.data.modal.fields).toEqual({ title: "Checkout fails", owner: "222", where: "555" });
  });
});
