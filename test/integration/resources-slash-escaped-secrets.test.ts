import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * README "Host-held models...": "everything coming back from an upstream (tool results, retrieved entries, model
 * answers, errors) is scrubbed of them". JSON text may carry a "/" as "\/" (RFC 8259 §7; PHP's json_encode does so
 * by default), so a credential with a "/" in it (an AWS-style secret key, any base64 token) echoed in an error body
 * reaches the runner escaped, which any JSON parser gives back verbatim. The scrubber knows only the `"` and `\` escapes.
 */
const SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
const PHP_ESCAPED = SECRET.replace(/\//g, "\\/");
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let upstream: Awaited<ReturnType<typeof listenLoopback>>;

beforeAll(async () => {
  upstream = await listenLoopback(async (req, res) => {
    await readBody(req);
    const got = (req.headers["x-api-key"] as string | undefined) ?? req.headers.authorization ?? "";
    // A PHP service's 401: json_encode escapes every "/".
    res.writeHead(401, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: "invalid credential", received: got }).replace(/\//g, "\\/"));
  });
  runner = await startScriptedRunner({ name: "slash", runners: [{ name: "default", label: { en_US: "slash" }, permissions: { tools: ["detail", "call"], knowledge_bases: ["retrieve"] } }] });
  host = await startTestHost({ captureLogs: true });
  const reg = async (path: string, body: unknown) => {
    const r = await host.admin("POST", path, body);
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  };
  await reg("/v1/admin/tools", { name: "refuse", description: "", endpoint: `${upstream.url}/refuse`, headers: { "x-api-key": SECRET } });
  await reg("/v1/admin/knowledge-bases", { kb_id: "kb", name: "kb", endpoint: `${upstream.url}/kb`, api_key: SECRET });
  await runner.register(host);
  await reg("/v1/admin/agents", {
    agent_id: "slash", name: "slash", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" }, resource_policy: { tools: ["refuse"], knowledge_bases: ["kb"] },
  });
});

afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), upstream?.close()]);
});

/** What the runner can read back out of the text it got: every JSON string in it, unescaped. */
const unescaped = (text: string) => text.replace(/\\\//g, "/");

describe("secrets with a '/' echoed as JSON text escapes it ('\\/')", () => {
  it("a tool's error body does not give the header value to the runner, nor to the log", async () => {
    const { result } = await runner.run(host, "slash-tool", async (api) => (await api("tool.call", { tool_name: "refuse", parameters: {} })).body);
    expect(result.ok).toBe(false);
    expect(unescaped(result.error.message)).not.toContain(SECRET);
    expect(host.logs()).not.toContain(PHP_ESCAPED);
  });

  it("a retrieval endpoint's error body does not give the api key to the runner", async () => {
    const { result } = await runner.run(host, "slash-kb", async (api) => (await api("knowledge.retrieve", { kb_id: "kb", query: "q" })).body);
    expect(result.ok).toBe(false);
    expect(unescaped(result.error.message)).not.toContain(SECRET);
  });
});
