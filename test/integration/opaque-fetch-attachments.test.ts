import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { BROKEN_CHUNKED_BODY, listenAnsweringRaw, MALFORMED_STATUS_LINE, type LoopbackServer } from "../support/http-server";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * An attachment URL workerd's fetch fails with its opaque "internal error; reference = …" (a host name that does not
 * resolve; an answer, or a body, that is no readable HTTP): the event's 400 attachment_unavailable names those known
 * causes and the reference, never the URL (a signed one carries its credential); any other failure says what it said.
 */
const SIGNATURE = "sig-opaque-attachment-5e2a9c";
const NAMED = "the runtime's opaque internal error \\(runtime reference [^;\\s]+; its known causes: a host name that does not resolve, or an answer that is no readable HTTP, such as a malformed status line or header or headers over 128 KiB in all, or a body whose chunked framing is broken\\)";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let garbled: LoopbackServer;
let brokenBody: LoopbackServer;

beforeAll(async () => {
  garbled = await listenAnsweringRaw(MALFORMED_STATUS_LINE);
  brokenBody = await listenAnsweringRaw(BROKEN_CHUNKED_BODY);
  runner = await startAdHocRunner({ name: "opaque-attachments", onRun: async ({ body }, res) => resultWriter(res, body.context.run_id).reply("seen") });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "opaque-attachments" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await garbled?.close();
  await brokenBody?.close();
});

describe("an attachment URL the runtime fails to fetch with its opaque error", () => {
  it("is refused 400 attachment_unavailable naming the known causes, and nothing is recorded", async () => {
    const cases: [string, RegExp][] = [
      [`http://no-such-host.invalid/photo.png?signature=${SIGNATURE}`, new RegExp(`^input\\.attachments\\.0: the URL could not be fetched: ${NAMED}$`)],
      [`${garbled.url}/photo.png?signature=${SIGNATURE}`, new RegExp(`^input\\.attachments\\.0: the URL could not be fetched: ${NAMED}$`)],
      [`${brokenBody.url}/photo.png?signature=${SIGNATURE}`, new RegExp(`^input\\.attachments\\.0: the URL's body could not be read: ${NAMED}$`)],
      // A refused connection is no opaque failure: it says what it always said.
      [`http://127.0.0.1:1/photo.png?signature=${SIGNATURE}`, /^input\.attachments\.0: the URL could not be fetched$/],
    ];
    for (const [i, [url, message]] of cases.entries()) {
      const res = await host.postEvent({ ...messageEvent("opaque-attachments", "see attached", { input: { text: "see attached", attachments: [{ url }] } }), event_id: `opaque-att-${i}` });
      expect({ i, status: res.status, code: res.body.error?.code }).toEqual({ i, status: 400, code: "attachment_unavailable" });
      expect(res.body.error?.message).toMatch(message);
      expect(JSON.stringify(res.body)).not.toContain(SIGNATURE);
    }
    expect(await host.query("SELECT event_id FROM event_log WHERE event_id LIKE 'opaque-att-%'")).toEqual([]);
  });
});
