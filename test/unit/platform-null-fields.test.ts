import { describe, expect, it } from "vitest";
import { normalizeLarkPayload } from "../../src/platforms/lark/normalize";
import { normalizeUpdate } from "../../src/platforms/telegram/normalize";

/**
 * README "Chat platforms": "a field a platform sends as `null` counts as absent, as an omitted one does".
 * A message that says "none" with null must run exactly as one that omits the field.
 */
describe("optional platform fields sent as null", () => {
  it("Telegram: a message with null optional fields is still a message.received in its chat", () => {
    const message = { message_id: 9, date: 1_700_000_000, chat: { id: 77, type: "private", title: null }, from: { id: 42, is_bot: false, first_name: "Ada", last_name: null, username: null }, text: "hello", entities: null, reply_to_message: null, message_thread_id: null, is_topic_message: null };
    const [ev] = normalizeUpdate({ update_id: 5, message });
    expect(ev).toMatchObject({ key: "5", eventType: "message.received", conversationId: "77", threadId: null, text: "hello", actor: { actor_id: "42", actor_name: "Ada" } });
  });

  it("Telegram: an edit with null optional fields is still recorded in its chat", () => {
    const [ev] = normalizeUpdate({ update_id: 6, edited_message: { message_id: 9, date: 1, chat: { id: 77, type: "private" }, text: "x", message_thread_id: null, is_topic_message: null } });
    expect(ev).toMatchObject({ eventType: null, conversationId: "77" });
  });

  it("Lark: a message whose sender ids carry null (union_id) is still a message.received", () => {
    const [ev] = normalizeLarkPayload(
      {
        schema: "2.0",
        header: { event_id: "e1", event_type: "im.message.receive_v1", create_time: "1700000000000", tenant_key: "t" },
        event: {
          sender: { sender_id: { open_id: "ou_1", union_id: null, user_id: null }, sender_type: "user", tenant_key: "t" },
          message: { message_id: "om_1", chat_id: "oc_1", chat_type: "p2p", message_type: "text", content: JSON.stringify({ text: "hi" }), mentions: null },
        },
      },
      "k",
    );
    expect(ev).toMatchObject({ key: "e1", eventType: "message.received", conversationId: "oc_1", text: "hi", actor: { actor_id: "ou_1" } });
  });

  it("Lark: a member join whose user name is null is still a group.member_joined", () => {
    const [ev] = normalizeLarkPayload(
      { schema: "2.0", header: { event_id: "e2", event_type: "im.chat.member.user.added_v1" }, event: { chat_id: "oc_2", operator_id: null, users: [{ name: null, user_id: { open_id: "ou_2", union_id: null } }] } },
      "k",
    );
    expect(ev).toMatchObject({ eventType: "group.member_joined", conversationId: "oc_2", actor: { actor_id: "ou_2" } });
  });
});
