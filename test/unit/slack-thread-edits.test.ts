import { describe, expect, it } from "vitest";
import { EnvelopeSchema, normalizeEnvelope } from "../../src/platforms/slack/normalize";

/**
 * README: "A Slack thread is its own conversation, separate from its channel", and what the host does not handle
 * is recorded "in its chat when the payload names one". An edit of a reply in a thread (message_changed) names
 * its thread in the edited message (`message.thread_ts`), as a deletion names it in `previous_message`: it belongs
 * to the thread's conversation, as the deletion of the same reply does.
 */
const envelope = (event: Record<string, unknown>) => EnvelopeSchema.parse({ type: "event_callback", event_id: "Ev1", team_id: "T1", event_time: 1_800_000_000, event });

describe("Slack: an edited reply in a thread", () => {
  it("is recorded in the thread's conversation, like its deletion", () => {
    const reply = { type: "message", user: "U42", text: "fixed typo", ts: "1800000005.000200", thread_ts: "1800000000.000100" };
    const [edited] = normalizeEnvelope(
      envelope({ type: "message", subtype: "message_changed", hidden: true, channel: "C1", channel_type: "channel", ts: "1800000009.000300", event_ts: "1800000009.000300", message: { ...reply, edited: { user: "U42", ts: "1800000009.000000" } }, previous_message: { ...reply, text: "fixd typo" } }),
      "fallback",
    );
    const [deleted] = normalizeEnvelope(
      envelope({ type: "message", subtype: "message_deleted", hidden: true, channel: "C1", ts: "1800000010.000300", deleted_ts: reply.ts, previous_message: reply }),
      "fallback",
    );
    expect(deleted).toMatchObject({ conversationId: "C1", threadId: "1800000000.000100" });
    expect(edited).toMatchObject({ eventType: null, sourceEventType: "message.message_changed", conversationId: "C1", threadId: "1800000000.000100" });
  });

  it("names the message it changes (README \"A busy conversation\"): a person's edit with its words and time, a thread parent's tombstone as a recall, never the bot's own streamed answer", () => {
    const changed = (message: Record<string, unknown>) =>
      normalizeEnvelope(envelope({ type: "message", subtype: "message_changed", hidden: true, channel: "C1", ts: "1800000020.000300", message, previous_message: { ...message, text: "before" } }), "fallback")[0].revises;
    expect(changed({ type: "message", user: "U42", text: "a &lt; b", ts: "1800000005.000200", edited: { user: "U42", ts: "1800000019.000000" } })).toEqual({ field: "ts", id: "1800000005.000200", edit: { text: "a < b", version: 1800000019 } });
    expect(changed({ type: "message", subtype: "tombstone", user: "USLACKBOT", text: "This message was deleted.", ts: "1800000000.000100", thread_ts: "1800000000.000100" })).toEqual({ field: "ts", id: "1800000000.000100" });
    expect(changed({ type: "message", subtype: "bot_message", bot_id: "B1", text: "re: draft", ts: "1800000006.000200", edited: { user: "B1", ts: "1800000019.000000" } })).toBeUndefined();
    // A link preview added: no `edited`, the words unchanged.
    expect(changed({ type: "message", user: "U42", text: "see https://example.com", ts: "1800000007.000200", attachments: [{}] })).toBeUndefined();
    const [deleted] = normalizeEnvelope(envelope({ type: "message", subtype: "message_deleted", hidden: true, channel: "C1", ts: "1800000010.000300", deleted_ts: "1800000005.000200" }), "fallback");
    expect(deleted.revises).toEqual({ field: "ts", id: "1800000005.000200" });
  });
});
