import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * Secrets that JSON escapes (a `"` or `\` in a tool header value or a knowledge-base key; the suite's own fixture
 * registers such values) are scrubbed from parsed JSON results (redactValue works on the decoded strings), but not
 * from upstream text that is JSON the host did not parse: an error body (httpError keeps it as raw text) or a JSON
 * answer labelled text/plain. There the secret appears escaped (`\"`, `\\`), redact() looks for it unescaped, and
 * the runner gets the credential in a form any JSON parser gives back verbatim.
 */
const QUOTED = `tok"en\\0123456789abcdef`;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let upstream: Awaited<ReturnType<typeof listenLoopback>>;

beforeAll(async () => {
  upstream = await listenLoopback(async (req, res) => {
    await readBody(req);
    const got = (req.headers["x-api-key"] as string | undefined) ?? req.headers.authorization;
    if (req.url === "/refuse" || req.url === "/kb") return sendJson(res, 401, { error: { message: "invalid credential", received: got } });
    // JSON, labelled as plain text (a common misconfiguration).
    res.writeHead(200, { "content-type": "text/plain" });
    res.end(JSON.stringify({ you_sent: got }));
  });
  runner = await startScriptedRunner({ name: "esc", runners: [{ name: "default", label: { en_US: "esc" }, permissions: { tools: ["detail", "call"], knowledge_bases: ["retrieve"] } }] });
  host = await startTestHost({ captureLogs: true });
  const reg = async (path: string, body: unknown) => {
    const r = await host.admin("POST", path, body);
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  };
  await reg("/v1/admin/tools", { name: "refuse", description: "", endpoint: `${upstream.url}/refuse`, headers: { "x-api-key": QUOTED } });
  await reg("/v1/admin/tools", { name: "plain", description: "", endpoint: `${upstream.url}/plain`, headers: { "x-api-key": QUOTED } });
  await reg("/v1/admin/knowledge-bases", { kb_id: "kb", name: "kb", endpoint: `${upstream.url}/kb`, api_key: QUOTED });
  await runner.register(host);
  await reg("/v1/admin/agents", {
    agent_id: "esc", name: "esc", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" }, resource_policy: { tools: ["refuse", "plain"], knowledge_bases: ["kb"] },
  });
});

afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), upstream?.close()]);
});

/** The secret as any JSON text carries it. */
const ESCAPED = JSON.stringify(QUOTED).slice(1, -1);

describe("secrets that JSON escapes, echoed in upstream text", () => {
  it("a tool's error body quoting the header value does not give it to the runner", async () => {
    const { result } = await runner.run(host, "esc-refuse", async (api) => (await api("tool.call", { tool_name: "refuse", parameters: {} })).body);
    expect(result.error?.message ?? "").not.toContain(ESCAPED);
    expect(host.logs()).not.toContain(ESCAPED);
  });

  it("a retrieval endpoint's error body quoting the api key does not give it to the runner", async () => {
    const { result } = await runner.run(host, "esc-kb", async (api) => (await api("knowledge.retrieve", { kb_id: "kb", query: "q" })).body);
    expect(result.error?.message ?? "").not.toContain(ESCAPED);
  });

  it("a tool's JSON answer labelled text/plain quoting the header value does not give it to the runner", async () => {
    const { result } = await runner.run(host, "esc-plain", async (api) => (await api("tool.call", { tool_name: "plain", parameters: {} })).body);
    expect(JSON.stringify(result.data?.result ?? "")).not.toContain(JSON.stringify(ESCAPED).slice(1, -1));
    expect(String(result.data?.result ?? "")).not.toContain(ESCAPED);
  });
});
