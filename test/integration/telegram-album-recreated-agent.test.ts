import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/fake-platform";
import { startTelegramChat } from "../support/telegram-chat";

/**
 * A Telegram album's items gather into the run of its first item's agent (README "Chat platforms"). An agent deleted
 * and created anew under its id is another agent (README "Effective access"): the run the DELETE left
 * (`?runs=leave`) fails with `host.agent_unavailable` as it starts. An item bound to the new agent must not join
 * that run, where it would never be answered; nor, still downloading, hold that run once it arrived (the new agent's
 * run, queued behind it, would wait with it).
 */
let chat: Awaited<ReturnType<typeof startTelegramChat>>;
const AGENT = "album-recreated";
const chatId = "-882001";
let updateId = 62_000;

beforeAll(async () => {
  // Long enough a wait for the agent to be deleted and created anew while the first item's run still gathers.
  chat = await startTelegramChat(AGENT, { vars: { ALBUM_WAIT_MS: "4000" } });
});
afterAll(async () => {
  await chat?.dispose();
});

function item(messageId: number, inChat = chatId) {
  const message = {
    message_id: messageId,
    date: Math.floor(Date.now() / 1000),
    chat: { id: Number(inChat), type: "supergroup", title: "Album group" },
    from: { id: 42, is_bot: false, first_name: "Ada" },
    media_group_id: "album-recreated",
    photo: [{ file_id: `photo-${messageId}`, width: 800, height: 800 }],
  };
  return { update_id: ++updateId, message };
}

async function post(update: unknown): Promise<void> {
  const res = await fetch(chat.webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": chat.secretToken }, body: JSON.stringify(update) });
  await res.text();
  expect(res.status).toBe(200);
}

/** The agent deleted, leaving its runs, and created anew under its id. */
async function recreateAgent(): Promise<void> {
  expect((await chat.host.admin("DELETE", `/v1/admin/agents/${AGENT}?runs=leave`)).status).toBe(200);
  const agent = { agent_id: AGENT, name: AGENT, runner_id: chat.runner.runnerId(), event_types: ["message.received"], scope: { type: "bot", id: chat.botId } };
  expect((await chat.host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
}

describe("a Telegram album's item for an agent deleted and created anew while the old one's album run gathers", () => {
  it("starts a run of the new agent's own, not joining the old one's, which fails", async () => {
    await post(item(601));
    // Within the album's wait the operator deletes the agent, leaving its runs, and creates it anew under its id.
    await recreateAgent();
    await post(item(602));

    const rows = await chat.host.query<{ disposition: string; run_id: string }>(
      "SELECT disposition, run_id FROM event_log WHERE conversation_id = ? AND event_type = 'message.received' ORDER BY seq",
      [chatId],
    );
    expect(rows.map((r) => r.disposition)).toEqual(["bound", "bound"]);
    expect(rows[1].run_id).not.toBe(rows[0].run_id);
    expect((await chat.host.waitForRun(rows[0].run_id, 20_000)).error?.code).toBe("host.agent_unavailable");
    expect((await chat.host.waitForRun(rows[1].run_id, 20_000)).status).toBe("completed");
    const runsHere = () => chat.runner.contexts.filter((c) => c.conversation.conversation_id === chatId);
    const [ctx] = await waitFor(() => runsHere().length > 0 && runsHere(), 20_000, "the new agent's run");
    expect(ctx.run_id).toBe(rows[1].run_id);
    expect(ctx.input.attachments).toHaveLength(1);
    expect(runsHere()).toHaveLength(1);
  }, 40_000);

  it("an item still downloading holds the old agent's run only until it arrives, though it joins the new agent's run", async () => {
    const inChat = "-882002";
    // 613's download outlasts the wait; until it arrives it holds every run gathering the album (its announcement's
    // bound is tens of seconds: PLATFORM_API_TIMEOUT_MS + INPUT_ATTACHMENT_FETCH_TIMEOUT_MS + BLOB_OP_TIMEOUT_MS + DB_QUERY_TIMEOUT_MS).
    chat.slowFiles.set("photos/photo-613.jpg", 2_500);
    await post(item(611, inChat));
    const slowItem = item(613, inChat);
    const slow = post(slowItem);
    await recreateAgent();
    // 612, of the new agent, starts its run; 613 then arrives and joins that one.
    await post(item(612, inChat));
    await slow;
    const rows = await chat.host.query<{ event_id: string; disposition: string; run_id: string }>(
      "SELECT event_id, disposition, run_id FROM event_log WHERE conversation_id = ? AND event_type = 'message.received' ORDER BY seq",
      [inChat],
    );
    expect(rows.map((r) => r.disposition)).toEqual(["bound", "bound", "merged"]);
    expect(rows[2].event_id.endsWith(`:${slowItem.update_id}`)).toBe(true);
    expect(rows[2].run_id).toBe(rows[1].run_id);
    // The old agent's run waits for 613 no more once it arrived: it fails as it starts, and the new agent's run
    // (queued behind it) begins ALBUM_WAIT_MS after 613 joined, not once 613's announcement lapsed.
    expect((await chat.host.waitForRun(rows[0].run_id, 15_000)).error?.code).toBe("host.agent_unavailable");
    expect((await chat.host.waitForRun(rows[1].run_id, 15_000)).status).toBe("completed");
    const runsHere = chat.runner.contexts.filter((c) => c.conversation.conversation_id === inChat);
    expect(runsHere.map((c) => [c.run_id, c.input.attachments.length])).toEqual([[rows[1].run_id, 2]]);
  }, 40_000);
});
