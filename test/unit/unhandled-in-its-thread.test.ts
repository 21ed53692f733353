import { describe, expect, it } from "vitest";
import { EnvelopeSchema, normalizeEnvelope } from "../../src/platforms/slack/normalize";
import { normalizeUpdate } from "../../src/platforms/telegram/normalize";

/**
 * README: what the host does not handle is recorded as `platform.unhandled` "in its chat when the payload names
 * one"; a Telegram forum topic is its chat's thread (`message_thread_id`), as a Slack thread is.
 */
describe("unhandled platform events are recorded where their payload says they happened", () => {
  it("Telegram: a button pressed under a message in a forum topic belongs to that topic, as an edit there does, run or not", () => {
    const inTopic = { message_id: 900, date: 1_800_000_000, chat: { id: -100300, type: "supergroup", is_forum: true }, message_thread_id: 77, is_topic_message: true, text: "pick one" };
    const [edited] = normalizeUpdate({ update_id: 1, edited_message: { ...inTopic, edit_date: 1_800_000_001, from: { id: 42, first_name: "Ada" } } } as never);
    const [pressed] = normalizeUpdate({
      update_id: 2,
      callback_query: { id: "cb1", from: { id: 42, is_bot: false, first_name: "Ada" }, chat_instance: "ci", data: "yes", message: { ...inTopic, from: { id: 1, is_bot: true, first_name: "Bot" } } },
    } as never);
    // A game's button carries no callback_data: nothing to run, recorded where it was pressed.
    const [game] = normalizeUpdate({
      update_id: 3,
      callback_query: { id: "cb2", from: { id: 42, is_bot: false, first_name: "Ada" }, chat_instance: "ci", game_short_name: "chess", message: { ...inTopic, from: { id: 1, is_bot: true, first_name: "Bot" } } },
    } as never);
    expect(edited).toMatchObject({ eventType: null, conversationId: "-100300", threadId: "77" });
    expect(game).toMatchObject({ eventType: null, sourceEventType: "callback_query", conversationId: "-100300", threadId: "77" });
    // A press with data runs (README "Chat platforms"), in the same topic.
    expect(pressed).toMatchObject({ eventType: "message.received", sourceEventType: "callback_query", conversationId: "-100300", threadId: "77" });
  });

  it("Slack: a reaction is recorded in the channel its item names", () => {
    const [reaction] = normalizeEnvelope(
      EnvelopeSchema.parse({
        type: "event_callback",
        event_id: "EvR1",
        team_id: "T1",
        event_time: 1_800_000_000,
        event: { type: "reaction_added", user: "U42", reaction: "thumbsup", item_user: "U1", item: { type: "message", channel: "C100", ts: "1800000000.000100" }, event_ts: "1800000001.000100" },
      }),
      "fallback",
    );
    expect(reaction).toMatchObject({ eventType: null, sourceEventType: "reaction_added", conversationId: "C100" });
  });
});
