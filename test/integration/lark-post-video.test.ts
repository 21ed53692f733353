import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startChatRunner, startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";

/**
 * README (Chat platforms): "Events become message.received (images, files and voice downloaded into R2 as input
 * artifacts)"; a file that cannot be fetched is left out with its reason in `attachments_unavailable`. A Lark rich-text
 * message (`post`) carries a video as a `media` element, fetched through the message's resources (`type=file`) as a
 * standalone video is: the runner must get it, as it gets the post's images.
 */
const APP_ID = "cli_post_video_0001";
const VERIFICATION_TOKEN = "lark-post-video-verification";
const VIDEO = new Uint8Array([0, 0, 0, 0x18, 0x66, 0x74, 0x79, 0x70, 1, 2, 3]);

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let webhookUrl = "";

function larkApi(call: PlatformCall): FakeReply {
  if (call.path === "/open-apis/auth/v3/tenant_access_token/internal") return { json: { code: 0, msg: "ok", tenant_access_token: "t-post-video", expire: 7200 } };
  if (call.path === "/open-apis/im/v1/messages/om_post_video/resources/file_v2_clip" && call.query.get("type") === "file") return { bytes: VIDEO, headers: { "content-type": "video/mp4" } };
  if (call.method === "POST" && /\/reply$/.test(call.path)) return { json: { code: 0, msg: "success", data: { message_id: "om_answer" } } };
  return { status: 404, json: { code: 404, msg: "not found" } };
}

beforeAll(async () => {
  fake = await startFakePlatform(larkApi);
  runner = await startChatRunner("lark-post-video");
  host = await startTestHost();
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "lark", api_base_url: fake.url, credentials: { app_id: APP_ID, app_secret: "lark-post-video-secret", verification_token: VERIFICATION_TOKEN } });
  webhookUrl = created.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "lark-post-video", scope: { type: "bot", id: created.body.bot_id } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

describe("a Lark rich-text message with a video", () => {
  it("gives the runner the video as an input artifact, with the text", async () => {
    const content = { title: "", content: [[{ tag: "text", text: "what happens in this clip?" }], [{ tag: "media", file_key: "file_v2_clip", image_key: "img_v2_preview" }]] };
    const payload = {
      schema: "2.0",
      header: { event_id: "ev_post_video_1", event_type: "im.message.receive_v1", create_time: String(Date.now()), token: VERIFICATION_TOKEN, app_id: APP_ID, tenant_key: "t1" },
      event: { sender: { sender_id: { open_id: "ou_ada" }, sender_type: "user" }, message: { message_id: "om_post_video", chat_id: "oc_video", chat_type: "group", message_type: "post", content: JSON.stringify(content) } },
    };
    const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(payload) });
    expect(res.status).toBe(200);
    const ctx = await waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === "oc_video"), 15_000, "the run");
    expect(ctx.input.text).toBe("what happens in this clip?");
    expect(ctx.input.attachments, "the post's video").toEqual([expect.objectContaining({ artifact_type: "video", size_bytes: VIDEO.length })]);
    expect(await host.r2Object(`artifacts/${ctx.input.attachments[0].artifact_id}`)).toEqual(VIDEO);
  });
});
