import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startChatRunner, startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";

/**
 * The host keeps a Lark tenant token per Worker instance until shortly before Lark says it expires, but Lark may refuse
 * it sooner (99991663, "Invalid access token"). Its API calls then fetch a token anew and retry; a user's file must not
 * be lost for it either: the message resource is fetched once more with a fresh token.
 */
const APP_ID = "cli_download_token_0001";
const VERIFICATION_TOKEN = "lark-download-token-verification";
const IMAGE = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 9, 8, 7]);

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let webhookUrl = "";
let botId = "";
/** The one token Lark takes now; null once it was revoked, until a new one is asked for. */
let current: string | null = null;
let issued = 0;

function larkApi(call: PlatformCall): FakeReply {
  if (call.path === "/open-apis/auth/v3/tenant_access_token/internal") {
    current ??= `t-download-token-${++issued}`;
    return { json: { code: 0, msg: "ok", tenant_access_token: current, expire: 7200 } };
  }
  if (current === null || call.headers.authorization !== `Bearer ${current}`) return { status: 400, json: { code: 99991663, msg: "Invalid access token for authorization. Please make a request with token attached." } };
  if (/^\/open-apis\/im\/v1\/messages\/om_img_[ab]\/resources\/img_[ab]$/.test(call.path) && call.query.get("type") === "image") return { bytes: IMAGE, headers: { "content-type": "image/png" } };
  if (call.method === "POST" && /\/reply$/.test(call.path)) return { json: { code: 0, msg: "success", data: { message_id: `om_answer_${call.path}` } } };
  return { status: 404, json: { code: 404, msg: "not found" } };
}

beforeAll(async () => {
  fake = await startFakePlatform(larkApi);
  runner = await startChatRunner("lark-download-token");
  host = await startTestHost();
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "lark", api_base_url: fake.url, credentials: { app_id: APP_ID, app_secret: "lark-download-token-secret", verification_token: VERIFICATION_TOKEN } });
  webhookUrl = created.body.webhook_url;
  botId = created.body.bot_id;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "lark-download-token", scope: { type: "bot", id: created.body.bot_id } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

const image = (suffix: "a" | "b") => ({
  schema: "2.0",
  header: { event_id: `ev_download_token_${suffix}`, event_type: "im.message.receive_v1", create_time: String(Date.now()), token: VERIFICATION_TOKEN, app_id: APP_ID, tenant_key: "t1" },
  event: { sender: { sender_id: { open_id: "ou_ada" }, sender_type: "user" }, message: { message_id: `om_img_${suffix}`, chat_id: `oc_img_${suffix}`, chat_type: "p2p", message_type: "image", content: JSON.stringify({ image_key: `img_${suffix}` }) } },
});

describe("a Lark image sent while the cached tenant token has gone stale", () => {
  it("is fetched once more with a token fetched anew, and reaches the runner", async () => {
    // The first image caches the token it was fetched with.
    expect((await fetch(webhookUrl, { method: "POST", body: JSON.stringify(image("a")) })).status).toBe(200);
    const first = await waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === "oc_img_a"), 15_000, "the first image's run");
    expect(first.input.attachments).toHaveLength(1);
    // Its answer sent too, so nothing of it is still on its way with that token when Lark stops taking it.
    await waitFor(() => fake.calls.some((c) => c.path === "/open-apis/im/v1/messages/om_img_a/reply" && c.reply !== undefined && (c.reply.status ?? 200) === 200), 15_000, "the first image's answer");
    const stale = current;
    // Lark stops taking it before the host's cache would drop it.
    current = null;
    expect((await fetch(webhookUrl, { method: "POST", body: JSON.stringify(image("b")) })).status).toBe(200);
    const ctx = await waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === "oc_img_b"), 15_000, "the second image's run");
    const [row] = await host.query<{ metadata_json: string }>("SELECT metadata_json FROM event_log WHERE event_id = ?", [`lark:${botId}:ev_download_token_b`]);
    expect(JSON.parse(row.metadata_json).attachments_unavailable, "the file's fate").toBeUndefined();
    expect(ctx.input.attachments).toEqual([expect.objectContaining({ artifact_type: "image", mime_type: "image/png", size_bytes: IMAGE.length })]);
    expect(await host.r2Object(`artifacts/${ctx.input.attachments[0].artifact_id}`)).toEqual(IMAGE);
    // Refused with the cached token, fetched again with the one Lark gave next.
    const fetches = fake.calls.filter((c) => c.path === "/open-apis/im/v1/messages/om_img_b/resources/img_b");
    expect(fetches.map((c) => c.headers.authorization)).toEqual([`Bearer ${stale}`, `Bearer ${current}`]);
    expect(current).not.toBe(stale);
  });
});
