import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createEchoRunner } from "../../examples/echo-runner/runner";

/**
 * The example runner is what runner authors copy (PROTOCOL §3): it refuses a
 * request the host did not sign, and a request that is not an AgentRunRequest
 * is the caller's error, refused as such (4xx), not a crash of the runner (500).
 */
const SECRET = "echo-runner-secret-0123456789";
const runner = createEchoRunner({ secret: SECRET });

function signed(body: string, ts = Math.floor(Date.now() / 1000)) {
  const sig = `v1=${createHmac("sha256", SECRET).update(`${ts}.${body}`).digest("hex")}`;
  return runner.request("/runners/default/run", {
    method: "POST",
    headers: { "content-type": "application/json", "x-agent-timestamp": String(ts), "x-agent-signature": sig },
    body,
  });
}

describe("the example runner's answer to a request it cannot run", () => {
  it("an unsigned request is refused with 401", async () => {
    const res = await runner.request("/runners/default/run", { method: "POST", body: "{}" });
    expect(res.status).toBe(401);
  });

  it("a signed request whose body is not JSON is refused with 400, not a 500 crash", async () => {
    const res = await signed("this is not json");
    expect(res.status).toBe(400);
  });

  it("a signed JSON body that is not an AgentRunRequest (no context) is refused with 400, not a 500 crash", async () => {
    const res = await signed(JSON.stringify({ runner_id: "http:examples/echo/default", runner_name: "default" }));
    expect(res.status).toBe(400);
  });
});
