import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/fake-platform";
import { callHostApi } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

const MAX = 1024; // INPUT_ATTACHMENT_MAX_BYTES of this host
const PNG = Buffer.concat([Buffer.from("89504e470d0a1a0a", "hex"), Buffer.alloc(300, 7)]);
const NOTES = Buffer.from("meeting notes: ship it");

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let files: Awaited<ReturnType<typeof startFileServer>>;

/** What the runner saw and read back through the Host API. */
interface Seen {
  input: any;
  reads: { status: number; bytes_b64?: string; metadata?: any }[];
  history_with: any[];
  history_without: any[];
}

beforeAll(async () => {
  files = await startFileServer();
  runner = await startAdHocRunner({
    name: "inputs",
    runners: [{ name: "default", label: { en_US: "inputs" }, capabilities: {}, permissions: { history: ["page"], artifacts: ["metadata", "read"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const api = (action: string, params: Record<string, unknown>) => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, action, params);
      const reads = [];
      for (const ref of ctx.input.attachments) {
        const read = await api("artifact.read", { artifact_id: ref.artifact_id });
        const meta = await api("artifact.metadata", { artifact_id: ref.artifact_id });
        reads.push({ status: read.status, bytes_b64: read.body.data?.content_base64, metadata: meta.body.data });
      }
      const withRefs = await api("history.page", { limit: 1, include_artifacts: true });
      const withoutRefs = await api("history.page", { limit: 1 });
      const seen: Seen = { input: ctx.input, reads, history_with: withRefs.body.data.items, history_without: withoutRefs.body.data.items };
      resultWriter(res, ctx.run_id).reply(JSON.stringify(seen));
    },
  });
  host = await startTestHost({ vars: { INPUT_ATTACHMENT_MAX_BYTES: String(MAX), INPUT_ATTACHMENT_FETCH_TIMEOUT_MS: "3000" } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "inputs" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await files?.close();
});

async function seenBy(runId: string): Promise<Seen> {
  const run = await host.waitForRun(runId);
  expect(run.status).toBe("completed");
  return JSON.parse(String(run.message?.content));
}

const withAttachments = (conversationId: string, attachments: unknown[], extra: Record<string, unknown> = {}) =>
  messageEvent(conversationId, "see attached", { input: { text: "see attached", attachments }, ...extra });

let firstArtifactId = "";

describe("input attachments", () => {
  it("stores base64 and URL attachments in R2 before the run; the runner gets only references", async () => {
    const event = withAttachments("att-1", [
      { content_base64: NOTES.toString("base64"), name: "notes.txt", mime_type: "text/plain" },
      { url: `${files.url}/photo.png` },
    ]);
    const posted = await host.postEvent({ ...event, event_id: "att-event-1" });
    expect(posted.status).toBe(202);
    const seen = await seenBy(posted.body.run_id!);

    const [notes, photo] = seen.input.attachments;
    expect(seen.input.attachments).toHaveLength(2);
    expect(notes).toEqual({ artifact_id: expect.stringMatching(/^art_in_[0-9a-z]+$/), artifact_type: "file", mime_type: "text/plain", name: "notes.txt", size_bytes: NOTES.length });
    expect(photo).toEqual({ artifact_id: expect.stringMatching(/^art_in_/), artifact_type: "image", mime_type: "image/png", name: "photo.png", size_bytes: PNG.length });
    // The multimodal view names them too, after the text.
    expect(seen.input.contents).toEqual([
      { type: "text", text: "see attached" },
      { type: "file", artifact_id: notes.artifact_id, name: "notes.txt" },
      { type: "image", artifact_id: photo.artifact_id },
    ]);
    // Nothing but references reaches the runner: no bytes, no source URL.
    const inputJson = JSON.stringify(seen.input);
    expect(inputJson).not.toContain(NOTES.toString("base64"));
    expect(inputJson).not.toContain(files.url);
    // EventLog keeps the same references, not the bytes.
    const [logged] = await host.query<{ input_json: string }>("SELECT input_json FROM event_log WHERE event_id = 'att-event-1'");
    expect(JSON.parse(logged.input_json).attachments).toEqual([notes, photo]);

    // The bytes are in R2 under the artifact's key and readable through the Host API.
    expect(Buffer.from((await host.r2Object(`artifacts/${notes.artifact_id}`))!)).toEqual(NOTES);
    expect(Buffer.from((await host.r2Object(`artifacts/${photo.artifact_id}`))!)).toEqual(PNG);
    expect(seen.reads.map((r) => r.status)).toEqual([200, 200]);
    expect(Buffer.from(seen.reads[0].bytes_b64!, "base64")).toEqual(NOTES);
    expect(Buffer.from(seen.reads[1].bytes_b64!, "base64")).toEqual(PNG);
    const meta = seen.reads[1].metadata;
    expect(meta).toMatchObject({ artifact_id: photo.artifact_id, source: "input", conversation_id: "att-1", size_bytes: PNG.length });
    expect(meta.sha256).toMatch(/^[0-9a-f]{64}$/);
    // Default ARTIFACT_TTL_SECONDS: 30 days.
    expect(Date.parse(meta.expires_at) - Date.parse(meta.created_at)).toBe(30 * 24 * 3600 * 1000);

    // The user transcript item carries the refs, shown only with include_artifacts.
    expect(seen.history_with[0]).toMatchObject({ role: "user", content: "see attached", content_json: seen.input.contents, artifact_refs: [notes, photo] });
    expect(seen.history_without[0]).toMatchObject({ role: "user", artifact_refs: [] });
    firstArtifactId = notes.artifact_id;
  });

  it("a re-delivered event downloads nothing and writes no blob or row again", async () => {
    const keysBefore = await host.r2Keys("artifacts/");
    const hitsBefore = files.hits.get("/photo.png");
    const event = withAttachments("att-1", [
      { content_base64: NOTES.toString("base64"), name: "notes.txt", mime_type: "text/plain" },
      { url: `${files.url}/photo.png` },
    ]);
    const again = await host.postEvent({ ...event, event_id: "att-event-1" });
    expect(again.status).toBe(200);
    expect(again.body.disposition).toBe("duplicate");
    expect(files.hits.get("/photo.png")).toBe(hitsBefore);
    expect(await host.r2Keys("artifacts/")).toEqual(keysBefore);
    const rows = await host.query("SELECT artifact_id FROM artifact WHERE metadata_json LIKE ?", ['%"event_id":"att-event-1"%']);
    expect(rows).toHaveLength(2);
  });

  it("a retry whose attachment URL was signed again (a presigned URL's new query) is the same event: a duplicate, fetched once; another file's URL is a conflict", async () => {
    const signed = (sig: string) => withAttachments("att-presigned", [{ url: `${files.url}/photo.png?X-Amz-Date=20260101T00000${sig}Z&X-Amz-Signature=${sig.repeat(16)}` }], { event_id: "att-presigned-1" });
    const first = await host.postEvent(signed("1"));
    expect(first.status).toBe(202);
    const hitsAfterFirst = files.hits.get("/photo.png");
    // The client timed out waiting and retries, building its request afresh: a new signature for the same file.
    expect(await host.postEvent(signed("2"))).toEqual({ status: 200, body: { event_id: "att-presigned-1", run_id: first.body.run_id, disposition: "duplicate" } });
    expect(files.hits.get("/photo.png")).toBe(hitsAfterFirst);
    const otherFile = await host.postEvent(withAttachments("att-presigned", [{ url: `${files.url}/odd/other.txt?X-Amz-Signature=3` }], { event_id: "att-presigned-1" }));
    expect([otherFile.status, otherFile.body.error?.code]).toEqual([409, "event_id_conflict"]);
    expect((await seenBy(first.body.run_id!)).input.attachments).toHaveLength(1);
  });

  it("two deliveries of one event at once: the one that fails removes only its own blobs, never those the other recorded", async () => {
    const keysBefore = new Set(await host.r2Keys("artifacts/"));
    const event = { ...withAttachments("att-race", [{ url: `${files.url}/held/a` }, { url: `${files.url}/held/b` }]), event_id: "att-race-1" };
    const answer = (res: ServerResponse, status = 200) => res.writeHead(status, { "content-type": "text/plain" }).end(status === 200 ? "bytes" : "");
    const [x, y] = [host.postEvent(event), host.postEvent(event)];
    // Both fetch /held/a; one (X) stores it first and waits on /held/b, then the other (Y) stores its own and records the event.
    const [aX, aY] = await waitFor(() => files.held("/held/a").length === 2 && files.held("/held/a"), 10_000, "both fetches of a");
    answer(aX);
    const [bX] = await waitFor(() => files.held("/held/b").length === 1 && files.held("/held/b"), 10_000, "the first fetch of b");
    answer(aY);
    const bY = await waitFor(() => files.held("/held/b")[1], 10_000, "the second fetch of b");
    answer(bY);
    expect((await Promise.race([x, y])).status).toBe(202);
    // X's second file is unavailable: X is refused and removes what it wrote.
    answer(bX, 503);
    expect((await Promise.all([x, y])).map((r) => r.status).sort()).toEqual([202, 400]);
    const [recorded] = await host.query<{ input_json: string }>("SELECT input_json FROM event_log WHERE event_id = 'att-race-1'");
    const named = JSON.parse(recorded.input_json).attachments.map((a: { artifact_id: string }) => `artifacts/${a.artifact_id}`);
    expect(named).toHaveLength(2);
    // The blobs the recorded event names are there, and they are all that is new: nothing the refused attempt wrote is left.
    const added = (await host.r2Keys("artifacts/")).filter((k) => !keysBefore.has(k));
    expect(added.sort()).toEqual([...named].sort());
    const rows = await host.query("SELECT artifact_id FROM artifact WHERE metadata_json LIKE ?", ['%"event_id":"att-race-1"%']);
    expect(rows).toHaveLength(2);
  });

  it("refuses bad, unreachable or oversized attachments and records nothing", async () => {
    const keysBefore = await host.r2Keys("artifacts/");
    const cases: { attachments: unknown[]; status: number; code: string; message: RegExp }[] = [
      { attachments: [{ content_base64: "not base64!" }], status: 400, code: "invalid_request", message: /input\.attachments\.0\.content_base64/ },
      { attachments: [{ content_base64: "aGk=", url: `${files.url}/photo.png` }], status: 400, code: "invalid_request", message: /exactly one/ },
      { attachments: [{ url: "ftp://example.com/x" }], status: 400, code: "invalid_request", message: /input\.attachments\.0\.url/ },
      { attachments: [{ url: `${files.url}/missing` }], status: 400, code: "attachment_unavailable", message: /input\.attachments\.0: the URL answered HTTP 404/ },
      { attachments: [{ url: "http://127.0.0.1:1/refused" }], status: 400, code: "attachment_unavailable", message: /could not be fetched/ },
      { attachments: [{ content_base64: Buffer.alloc(MAX + 1).toString("base64") }], status: 413, code: "payload_too_large", message: /larger than 1024 bytes/ },
      { attachments: [{ url: `${files.url}/big-declared` }], status: 413, code: "payload_too_large", message: /larger than 1024 bytes/ },
      { attachments: [{ url: `${files.url}/big-chunked` }], status: 413, code: "payload_too_large", message: /larger than 1024 bytes/ },
      // What could not be given back as sent (a NUL cuts a stored name short) or is no media type.
      { attachments: [{ content_base64: "aGk=", name: "invoice.pdf\u0000.exe" }], status: 400, code: "invalid_request", message: /input\.attachments\.0\.name: must not contain control characters/ },
      { attachments: [{ content_base64: "aGk=", mime_type: "nonsense" }], status: 400, code: "invalid_request", message: /input\.attachments\.0\.mime_type: must be a media type/ },
      { attachments: [{ content_base64: "aGk=", mime_type: "text/plain\r\nX-Evil: 1" }], status: 400, code: "invalid_request", message: /input\.attachments\.0\.mime_type/ },
      // The first one is stored before the second fails: the refusal removes it again.
      { attachments: [{ content_base64: NOTES.toString("base64") }, { url: `${files.url}/missing` }], status: 400, code: "attachment_unavailable", message: /input\.attachments\.1/ },
    ];
    for (const [i, c] of cases.entries()) {
      const res = await host.postEvent({ ...withAttachments("att-bad", c.attachments), event_id: `att-bad-${i}` });
      expect({ i, status: res.status, code: (res.body as any).error?.code }).toEqual({ i, status: c.status, code: c.code });
      expect((res.body as any).error.message).toMatch(c.message);
    }
    expect(await host.r2Keys("artifacts/")).toEqual(keysBefore);
    expect(await host.query("SELECT event_id FROM event_log WHERE event_id LIKE 'att-bad-%'")).toEqual([]);
    // Nothing recorded: the same event id is accepted as new once its attachments are fine.
    const retry = await host.postEvent({ ...withAttachments("att-bad", [{ content_base64: NOTES.toString("base64") }]), event_id: `att-bad-${cases.length - 1}` });
    expect(retry.status).toBe(202);
    expect((await seenBy(retry.body.run_id!)).input.attachments).toHaveLength(1);
  });

  it("keeps a name or type taken from a URL only when it could have been given: a control character in either leaves it unset", async () => {
    const posted = await host.postEvent(withAttachments("att-url-names", [{ url: `${files.url}/odd/invoice.pdf%00.exe` }, { url: `${files.url}/odd/notes%0A.txt` }, { url: `${files.url}/photo.png` }]));
    const seen = await seenBy(posted.body.run_id!);
    expect(seen.input.attachments.map((a: any) => [a.name ?? null, a.mime_type ?? null])).toEqual([[null, null], [null, null], ["photo.png", "image/png"]]);
    expect(seen.reads.map((r) => [r.metadata.name ?? null, r.metadata.mime_type ?? null])).toEqual([[null, null], [null, null], ["photo.png", "image/png"]]);
  });

  it("references an existing artifact only within its own conversation", async () => {
    const same = await host.postEvent(withAttachments("att-1", [{ artifact_id: firstArtifactId, name: "ignored.bin" }]));
    expect(same.status).toBe(202);
    const seen = await seenBy(same.body.run_id!);
    // The stored facts win over what the client wrote.
    expect(seen.input.attachments).toEqual([{ artifact_id: firstArtifactId, artifact_type: "file", mime_type: "text/plain", name: "notes.txt", size_bytes: NOTES.length }]);
    expect(seen.input.contents).toEqual([{ type: "text", text: "see attached" }, { type: "file", artifact_id: firstArtifactId, name: "notes.txt" }]);
    expect(Buffer.from(seen.reads[0].bytes_b64!, "base64")).toEqual(NOTES);

    // Contents that already place the attachment keep their order and get no second element.
    const placed = [{ type: "file", artifact_id: firstArtifactId, name: "notes.txt" }, { type: "text", text: "what is this?" }];
    const ordered = await host.postEvent(messageEvent("att-1", "what is this?", { input: { contents: placed, attachments: [{ artifact_id: firstArtifactId }] } }));
    expect((await seenBy(ordered.body.run_id!)).input.contents).toEqual(placed);

    const elsewhere = await host.postEvent(withAttachments("att-2", [{ artifact_id: firstArtifactId }]));
    const unknown = await host.postEvent(withAttachments("att-2", [{ artifact_id: "art_unknown" }]));
    for (const [res, id] of [[elsewhere, firstArtifactId], [unknown, "art_unknown"]] as const) {
      expect(res.status).toBe(400);
      // One answer for "another conversation's" and "absent": existence is not disclosed.
      expect((res.body as any).error).toEqual({ code: "invalid_request", message: `input.attachments.0: artifact ${id} is not an artifact of this conversation` });
    }
  });

  it("checks an artifact named only in input.contents as one in input.attachments, and attaches it", async () => {
    const placed = [{ type: "text", text: "and this?" }, { type: "file", artifact_id: firstArtifactId, name: "notes.txt" }];
    const here = await host.postEvent(messageEvent("att-1", "and this?", { input: { contents: placed } }));
    expect(here.status).toBe(202);
    const seen = await seenBy(here.body.run_id!);
    expect(seen.input.contents).toEqual(placed);
    expect(seen.input.attachments.map((a: { artifact_id: string }) => a.artifact_id)).toEqual([firstArtifactId]);
    expect(Buffer.from(seen.reads[0].bytes_b64!, "base64")).toEqual(NOTES);

    // Another conversation's artifact, placed in contents instead of attachments, is refused alike.
    const elsewhere = await host.postEvent(messageEvent("att-2", "look", { input: { contents: [{ type: "text", text: "look" }, { type: "file", artifact_id: firstArtifactId }] } }));
    expect([elsewhere.status, (elsewhere.body as any).error]).toEqual([400, { code: "invalid_request", message: `input.contents.1: artifact ${firstArtifactId} is not an artifact of this conversation` }]);
  });
});

/** Files an event may point at, with a hit count per path; a request under /held/ waits for the test to answer it. */
async function startFileServer() {
  const hits = new Map<string, number>();
  const held = new Map<string, ServerResponse[]>();
  const server = createServer((req, res) => {
    // A query (a presigned URL's signature) names no other file.
    const path = (req.url ?? "/").split("?")[0];
    hits.set(path, (hits.get(path) ?? 0) + 1);
    if (path.startsWith("/held/")) return void held.set(path, [...(held.get(path) ?? []), res]);
    if (path === "/photo.png") return res.writeHead(200, { "content-type": "image/png", "content-length": PNG.length }).end(PNG);
    // A type that is no media type, and a name with a control character in its path.
    if (path.startsWith("/odd/")) return res.writeHead(200, { "content-type": "text plain" }).end(NOTES);
    if (path === "/big-declared") return res.writeHead(200, { "content-length": MAX + 1 }).end(Buffer.alloc(MAX + 1));
    if (path === "/big-chunked") {
      // No Content-Length: the host must count while reading.
      res.writeHead(200, { "content-type": "application/octet-stream" });
      for (let i = 0; i < 3; i++) res.write(Buffer.alloc(600, i));
      return res.end();
    }
    res.writeHead(404).end("not here");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hits,
    /** The requests for `path` waiting for an answer, in arrival order. */
    held: (path: string) => held.get(path) ?? [],
    close: () => new Promise<void>((done) => {
      server.closeAllConnections();
      server.close(() => done());
    }),
  };
}
