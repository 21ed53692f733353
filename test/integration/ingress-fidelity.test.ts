import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let files: { url: string; close: () => Promise<void> };

beforeAll(async () => {
  const server = createServer((req, res) => {
    if (req.url === "/stall-body") {
      // Headers at once, then a trickle that never ends.
      res.writeHead(200, { "content-type": "application/octet-stream" });
      res.write("x");
      const t = setInterval(() => res.write("x"), 200);
      res.on("close", () => clearInterval(t));
      return;
    }
    if (req.url === "/stall-headers") return; // never answers
    if (req.url === "/redirect-missing") return res.writeHead(302, { location: "/missing" }).end();
    if (req.url === "/ok.txt") return res.writeHead(200, { "content-type": "text/plain" }).end("hello");
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  files = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((d) => { server.closeAllConnections(); server.close(() => d()); }),
  };
  runner = await startAdHocRunner({
    name: "r16",
    runners: [{ name: "default", label: { en_US: "r16" }, capabilities: {}, permissions: {} }],
    async onRun({ body }, res) {
      resultWriter(res, body.context.run_id).reply(JSON.stringify({ input: body.context.input, event: body.context.event }));
    },
  });
  host = await startTestHost({ vars: { INPUT_ATTACHMENT_FETCH_TIMEOUT_MS: "1500" } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "r16" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await files?.close();
});

describe("ingress probes", () => {
  it("a URL attachment whose body never finishes is refused within the fetch timeout", async () => {
    const t0 = Date.now();
    const res = await host.postEvent(messageEvent("r16-stall-body", "x", { input: { text: "x", attachments: [{ url: `${files.url}/stall-body` }] } }));
    expect({ status: res.status, code: res.body.error?.code }).toEqual({ status: 400, code: "attachment_unavailable" });
    expect(Date.now() - t0).toBeLessThan(6000);
  }, 20_000);

  it("a URL attachment whose headers never come is refused within the fetch timeout", async () => {
    const t0 = Date.now();
    const res = await host.postEvent(messageEvent("r16-stall-head", "x", { input: { text: "x", attachments: [{ url: `${files.url}/stall-headers` }] } }));
    expect({ status: res.status, code: res.body.error?.code }).toEqual({ status: 400, code: "attachment_unavailable" });
    expect(Date.now() - t0).toBeLessThan(6000);
  }, 20_000);

  it("a redirect to a missing file is attachment_unavailable", async () => {
    const res = await host.postEvent(messageEvent("r16-redir", "x", { input: { text: "x", attachments: [{ url: `${files.url}/redirect-missing` }] } }));
    expect({ status: res.status, code: res.body.error?.code }).toEqual({ status: 400, code: "attachment_unavailable" });
  });

  it("data with a 64-bit id is kept exactly or refused, never stored rounded", async () => {
    const raw = `{"event_id":"r16-big","event_type":"message.received","conversation_id":"r16-big","actor":{"actor_type":"user","actor_id":"u1"},"input":{"text":"hi"},"data":{"snowflake":1234567890123456789}}`;
    const res = await fetch(`${host.url}/v1/events`, { method: "POST", headers: { authorization: `Bearer ${(await import("../support/host")).ADMIN_TOKEN}` }, body: raw });
    // Refused (as state.set refuses it), or kept as sent: never recorded and passed to the runner rounded.
    if (res.status === 400) {
      expect(((await res.json()) as any).error.message).toMatch(/data: the number \d+ is beyond/);
      expect(await host.query("SELECT event_id FROM event_log WHERE event_id = 'r16-big'")).toEqual([]);
      return;
    }
    expect(res.status).toBe(202);
    const got = await fetch(`${host.url}/v1/events/r16-big`, { headers: { authorization: `Bearer ${(await import("../support/host")).ADMIN_TOKEN}` } });
    const text = await got.text();
    expect(text).toContain("1234567890123456789");
  });

  it("the same event_id posted at once: one recorded event; the same body is a duplicate naming its run, a different one a 409 event_id_conflict", async () => {
    // Six copies of one event and six that each say something else, all at once.
    const same = Array.from({ length: 6 }, () => messageEvent("r16-race", "the text", { event_id: "r16-race-1" }));
    const other = Array.from({ length: 6 }, (_, i) => messageEvent("r16-race", `text ${i}`, { event_id: "r16-race-1" }));
    const answers = await Promise.all([...same, ...other].map((b) => host.postEvent(b)));
    const rows = await host.query<{ run_id: string; input_json: string }>("SELECT run_id, input_json FROM event_log WHERE event_id = 'r16-race-1'");
    expect(rows).toHaveLength(1);
    const runs = await host.query<{ run_id: string }>("SELECT run_id FROM run WHERE event_id = 'r16-race-1'");
    expect(runs).toHaveLength(1);
    // Whichever attempt was recorded first, the others that say the same are its duplicates and the rest conflict.
    const firstText = JSON.parse(rows[0].input_json).text as string;
    const sayFirst = [...same, ...other].map((b) => (b.input as { text: string }).text === firstText);
    answers.forEach((a, i) => {
      if (sayFirst[i]) {
        expect([200, 202]).toContain(a.status);
        expect(a.body.run_id).toBe(runs[0].run_id);
      } else expect([a.status, a.body.error?.code]).toEqual([409, "event_id_conflict"]);
    });
    expect(answers.filter((a) => a.status === 202)).toHaveLength(1);
    const items = await host.query("SELECT seq FROM transcript WHERE event_id = 'r16-race-1' AND role = 'user'");
    expect(items).toHaveLength(1);
    const run = await host.waitForRun(runs[0].run_id);
    expect(JSON.parse(String(run.message?.content)).input.text).toBe(firstText);
  });

  it("GET /v1/events/{id} and the conversation's EventLog agree with what was sent", async () => {
    const sent = messageEvent("r16-agree", "hello \u202Eevil", {
      event_id: "r16-agree-1",
      workspace_id: "ws\u05D0",
      thread_id: "th-1",
      event_time: "2024-02-29T23:30:00.123+05:30",
      source_event_type: "custom.thing",
      actor: { actor_type: "user", actor_id: "u-\u0645", actor_name: "N\u00e4me" },
      subject: { subject_type: "doc", subject_id: "d1" },
      data: { a: [1, "2", { b: null }] },
      metadata: { m: "v" },
    });
    const res = await host.postEvent(sent);
    expect(res.status).toBe(202);
    const one = await host.admin("GET", "/v1/events/r16-agree-1");
    const page = await host.admin("GET", `/v1/conversations/events?conversation_id=r16-agree&workspace_id=${encodeURIComponent("ws\u05D0")}&thread_id=th-1`);
    expect(one.status).toBe(200);
    expect(page.status).toBe(200);
    const inPage = page.body.items.find((i: any) => i.event_id === "r16-agree-1");
    expect(inPage).toBeDefined();
    for (const k of Object.keys(inPage)) if (k in one.body) expect({ k, v: one.body[k] }).toEqual({ k, v: inPage[k] });
    expect(one.body.event_time).toBe("2024-02-29T18:00:00.123Z");
    expect(one.body.data).toEqual({ a: [1, "2", { b: null }] });
    expect(one.body.metadata).toMatchObject({ m: "v" });
  });

  it("an API event whose metadata has its caller's own `recalled` key is answered: only a chat message's recall mark withdraws one", async () => {
    const res = await host.postEvent(messageEvent("r16-recalled-key", "still here", { metadata: { recalled: { event_id: "mine", recalled_at: "2024-01-01T00:00:00Z" } } }));
    expect(res.status).toBe(202);
    const run = await host.waitForRun(res.body.run_id!);
    expect({ status: run.status, answer: run.message?.content }).toEqual({ status: "completed", answer: expect.stringContaining('"text":"still here"') });
  });
});
