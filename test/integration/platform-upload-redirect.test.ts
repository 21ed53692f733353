import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { ANSWER_FILE, startChatRunner, startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";

const APP_ID = "cli_redirect_app_0001";
const APP_SECRET = "lark-app-secret-redirect-0123456789";
const VERIFICATION_TOKEN = "lark-verification-token-redirect";
const TENANT_TOKEN = "t-redirect-tenant-access-token-0123456789";

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let elsewhere: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let webhookUrl: string;
let n = 0;

function larkApi(call: PlatformCall): FakeReply {
  if (call.path === "/open-apis/auth/v3/tenant_access_token/internal") return { json: { code: 0, msg: "ok", tenant_access_token: TENANT_TOKEN, expire: 7200 } };
  if (call.headers.authorization !== `Bearer ${TENANT_TOKEN}`) return { status: 400, json: { code: 99991663, msg: "Invalid access token" } };
  if (/^\/open-apis\/im\/v1\/messages\/[^/]+\/reply$/.test(call.path)) return { json: { code: 0, msg: "success", data: { message_id: `om_reply_${++n}` } } };
  // The upload endpoint has moved to another origin (a storage front, or anything the API origin points at).
  if (call.path === "/open-apis/im/v1/files") return { status: 307, headers: { location: `${elsewhere.url}/sink/files` }, json: {} };
  return { status: 404, json: { code: 404, msg: "not found" } };
}

beforeAll(async () => {
  fake = await startFakePlatform(larkApi);
  elsewhere = await startFakePlatform(() => ({ json: { code: 0, msg: "success", data: { file_key: "file_elsewhere" } } }));
  runner = await startChatRunner("lark-redirect");
  host = await startTestHost();
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "lark", api_base_url: fake.url, credentials: { app_id: APP_ID, app_secret: APP_SECRET, verification_token: VERIFICATION_TOKEN } });
  expect(created.status).toBe(201);
  webhookUrl = created.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "lark-redirect-agent", scope: { type: "bot", id: created.body.bot_id } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
  await elsewhere?.close();
});

/**
 * A platform call that uploads a file follows a 307/308 itself (the file is streamed again); when the redirect
 * leaves the API's origin, the bot's credential is not sent along, as fetch does for the redirects it follows.
 */
describe("a redirected upload", () => {
  it("never carries the bot's bearer credential to another origin", async () => {
    const payload = {
      schema: "2.0",
      header: { event_id: "ev_redirect_1", event_type: "im.message.receive_v1", create_time: String(Date.now()), token: VERIFICATION_TOKEN, app_id: APP_ID, tenant_key: "tenant_1" },
      event: {
        sender: { sender_id: { open_id: "ou_user_1" }, sender_type: "user" },
        message: { message_id: "om_redirect_1", chat_id: "oc_redirect", chat_type: "group", message_type: "text", content: JSON.stringify({ text: "attach report.pdf" }) },
      },
    };
    const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(payload) });
    expect(res.status).toBe(200);
    const [redirected] = await waitFor(() => elsewhere.callsTo(/^\/sink\//).length > 0 && elsewhere.callsTo(/^\/sink\//), 15_000, "the redirected upload");
    // The 307 was followed with the file (a fresh body), but the tenant token stayed with the origin it belongs to.
    expect(fake.callsTo(/^\/open-apis\/im\/v1\/files$/)[0].headers.authorization).toBe(`Bearer ${TENANT_TOKEN}`);
    expect(redirected.bytes.includes(Buffer.from(ANSWER_FILE))).toBe(true);
    expect(redirected.headers.authorization).toBeUndefined();
  });
});
