import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * An agent's `runner_config` is handed to its runner as `ctx.config` as the operator wrote it. A whole number
 * beyond ±(2^53 − 1) (a Discord guild id, a Telegram chat id written as a number) is rounded by JSON parsing:
 * stored so, the runner gets another id and GET shows a value the operator never sent. The host refuses such
 * numbers wherever it keeps a value as sent (event data and metadata, state: README "HTTP API", "State"):
 * "What the host could not give back as it was sent is refused, never stored altered".
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "config-bigint" });
  host = await startTestHost();
  await runner.register(host);
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

const post = (path: string, method: string, text: string) =>
  fetch(`${host.url}${path}`, { method, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" }, body: text });

// A 64-bit id, and a 128-bit one (a uuid.int) written as an integer, which parses as 1.2345678901234568e+26.
for (const [label, big, id] of [
  ["a 64-bit whole number", "1234567890123456789", "big-config"],
  ["a whole number past 64 bits", "123456789012345678901234567", "big-config-128"],
] as const) {
  describe(`runner_config with ${label}`, () => {
    it("is refused with 400 on POST, never stored rounded", async () => {
      const text = `{"agent_id":"${id}","name":"big","runner_id":"${runner.runnerId()}","event_types":["message.received"],"runner_config":{"guild_id":${big}}}`;
      const res = await post("/v1/admin/agents", "POST", text);
      const body = (await res.json()) as any;
      const stored = await host.admin("GET", `/v1/admin/agents/${id}`);
      expect({ status: res.status, code: body.error?.code, stored: stored.status === 200 ? stored.body.runner_config : null }).toEqual({
        status: 400,
        code: "invalid_request",
        stored: null,
      });
    });

    it("is refused with 400 on PUT too", async () => {
      const created = await host.admin("POST", "/v1/admin/agents", { agent_id: `${id}-put`, name: "big", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "workspace", id: `w-${id}` } });
      expect(created.status).toBe(201);
      const text = `{"name":"big","runner_id":"${runner.runnerId()}","event_types":["message.received"],"scope":{"type":"workspace","id":"w-${id}"},"runner_config":{"chat_id":-${big}}}`;
      const res = await post(`/v1/admin/agents/${id}-put`, "PUT", text);
      const stored = await host.admin("GET", `/v1/admin/agents/${id}-put`);
      expect({ status: res.status, stored: stored.body.runner_config }).toEqual({ status: 400, stored: {} });
    });
  });
}
