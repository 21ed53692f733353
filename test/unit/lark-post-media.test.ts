import { describe, expect, it } from "vitest";
import { contentOf, normalizeLarkPayload } from "../../src/platforms/lark/normalize";

/**
 * README (Chat platforms): events become `message.received` with "images, files and voice downloaded into R2 as input
 * artifacts", and a file that cannot be fetched is left out with its reason in `attachments_unavailable`. A Lark rich
 * text (`post`) carries a video as a `media` element (`file_key`, fetched like a standalone video message through the
 * message's resources with `type=file`); it must reach the runner like the post's images do, not vanish silently.
 */
const post = {
  title: "",
  content: [
    [{ tag: "text", text: "what happens in this clip?" }],
    [{ tag: "media", file_key: "file_v2_clip", image_key: "img_v2_preview" }],
  ],
};

describe("a Lark rich-text post with a video", () => {
  it("keeps the video as one of the message's files, as a standalone video message does", () => {
    expect(contentOf("media", JSON.stringify({ file_key: "file_v2_clip", image_key: "img_v2_preview" })).files).toEqual([{ ref: "file:file_v2_clip", name: null, artifactType: "video" }]);
    const { text, files } = contentOf("post", JSON.stringify(post));
    expect(text).toBe("what happens in this clip?");
    expect(files).toEqual([expect.objectContaining({ ref: "file:file_v2_clip", artifactType: "video" })]);
  });

  it("runs a post that is only a video, instead of recording it as a message with neither words nor files", () => {
    const payload = {
      schema: "2.0",
      header: { event_id: "ev_video_post", event_type: "im.message.receive_v1", create_time: "1700000000000", token: "t" },
      event: {
        sender: { sender_id: { open_id: "ou_ada" }, sender_type: "user" },
        message: { message_id: "om_video", chat_id: "oc_1", chat_type: "group", message_type: "post", content: JSON.stringify({ title: "", content: [[{ tag: "media", file_key: "file_v2_only", image_key: "img_v2_p" }]] }) },
      },
    };
    const [event] = normalizeLarkPayload(payload, "fallback");
    expect(event.eventType).toBe("message.received");
    expect(event.files).toEqual([expect.objectContaining({ ref: "file:file_v2_only", artifactType: "video" })]);
  });
});
