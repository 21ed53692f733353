import { describe, expect, it } from "vitest";
import { normalizeUpdate } from "../../src/platforms/telegram/normalize";

/**
 * README (Chat platforms): events become `message.received` with "images, files and voice downloaded into R2 as input
 * artifacts". A Telegram video message (the round `video_note`, recorded like a voice message) is a message with a
 * file; it must run like a voice or video message, not be recorded as "platform.unhandled" (no answer at all).
 */
describe("a Telegram video message (video_note)", () => {
  it("is a message.received with its video as a file, like a voice message", () => {
    const message = { message_id: 10, date: 1_700_000_000, chat: { id: 42, type: "private" }, from: { id: 42, is_bot: false, first_name: "Ada" } };
    const [voice] = normalizeUpdate({ update_id: 1, message: { ...message, voice: { file_id: "voice-1", mime_type: "audio/ogg", duration: 3 } } } as any);
    expect(voice).toMatchObject({ eventType: "message.received", files: [{ ref: "voice-1", artifactType: "audio" }] });
    const [videoNote] = normalizeUpdate({ update_id: 2, message: { ...message, video_note: { file_id: "note-1", file_unique_id: "u1", length: 240, duration: 5 } } } as any);
    expect(videoNote.eventType).toBe("message.received");
    expect(videoNote.files).toEqual([expect.objectContaining({ ref: "note-1", artifactType: "video" })]);
  });
});
