import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * Tool header values are secrets, and everything coming back from an upstream is scrubbed of them: a header of
 * `name=value` pairs (a session cookie) has each credential value scrubbed on its own, so a careless tool that
 * echoes the cookies it parsed (as httpbin's /cookies does) hands the runner no session secret.
 */

const SESSION = "sess-5f4e3d2c1b0a99887766";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let tool: Awaited<ReturnType<typeof listenLoopback>>;

beforeAll(async () => {
  tool = await listenLoopback(async (req, res) => {
    await readBody(req);
    const cookies = Object.fromEntries(String(req.headers.cookie ?? "").split(/;\s*/).filter(Boolean).map((c) => c.split("=") as [string, string]));
    if (req.url === "/fail") return sendJson(res, 403, { error: `session ${cookies.session} has expired` });
    sendJson(res, 200, { cookies });
  });
  runner = await startScriptedRunner({ name: "cookie", runners: [{ name: "default", label: { en_US: "c" }, permissions: { tools: ["detail", "call"] } }] });
  host = await startTestHost({});
  for (const name of ["cookies", "fail"]) {
    const r = await host.admin("POST", "/v1/admin/tools", { name: `${name}_tool`, endpoint: `${tool.url}/${name}`, headers: { cookie: `session=${SESSION}; lang=en` } });
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  }
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "c", name: "c", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" }, resource_policy: { tools: ["cookies_tool", "fail_tool"] },
  });
  if (agent.status !== 201) throw new Error(JSON.stringify(agent.body));
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), tool?.close()]);
});

describe("a tool's session cookie", () => {
  it("never reaches the runner when the tool echoes it back, in a result or an error", async () => {
    const { result, runId } = await runner.run(host, "cookie", async (api) => ({
      ok: await api("tool.call", { tool_name: "cookies_tool", parameters: {} }),
      failed: await api("tool.call", { tool_name: "fail_tool", parameters: {} }),
    }));
    expect(result.ok.status).toBe(200);
    expect(result.failed.status).toBe(502);
    expect(JSON.stringify(result)).not.toContain(SESSION);
    const ledger = (await host.admin("GET", `/v1/runs/${runId}/events`)).body.items;
    expect(JSON.stringify(ledger)).not.toContain(SESSION);
  });
});
