import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * An HTTP tool's answer that is not JSON is returned as text, decoded as the charset its Content-Type names (a
 * legacy service answering in ISO-8859-1 keeps its "café"), UTF-8 when it names none.
 */

let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let tool: Awaited<ReturnType<typeof listenLoopback>>;

beforeAll(async () => {
  tool = await listenLoopback(async (req, res) => {
    await readBody(req);
    res.writeHead(200, { "content-type": "text/plain; charset=iso-8859-1" });
    res.end(Buffer.from("Caf\xe9 cr\xe8me, 20 \xb0C", "latin1"));
  });
  runner = await startScriptedRunner({ name: "charset", runners: [{ name: "default", label: { en_US: "c" }, permissions: { tools: ["detail", "call"] } }] });
  host = await startTestHost({});
  const r = await host.admin("POST", "/v1/admin/tools", { name: "legacy", endpoint: `${tool.url}/menu` });
  if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "c", name: "c", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" }, resource_policy: { tools: ["legacy"] },
  });
  if (agent.status !== 201) throw new Error(JSON.stringify(agent.body));
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), tool?.close()]);
});

describe("an HTTP tool answering text in its own charset", () => {
  it("has its text passed on as it means it", async () => {
    const { result } = await runner.run(host, "charset", async (api) => api("tool.call", { tool_name: "legacy", parameters: {} }));
    expect(result.body.data?.result).toBe("Café crème, 20 °C");
  });
});
