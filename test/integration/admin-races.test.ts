/**
 * the operator API's error contract and credential views.
 * README "HTTP API": errors are 400/401/403/404/409/413 (conflict: 409) in
 * `{error: {code, message}}`; a 500 is for the host's own failures.
 * README "Credentials at rest": "Credentials inside endpoint URLs are stored as
 * given (views mask them)".
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startChatRunner } from "../support/fake-platform";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startChatRunner>>;

beforeAll(async () => {
  runner = await startChatRunner("admin-races");
  host = await startTestHost({ captureLogs: true });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("concurrent creates of the same id", () => {
  it("answers 201 once and 409 for the rest when the same bot_id is POSTed concurrently, never 500", async () => {
    const statuses: number[] = [];
    for (let round = 0; round < 10; round++) {
      const bot = { bot_id: `race-bot-${round}`, platform: "telegram", credentials: { bot_token: "123456:raceTOKEN", secret_token: "race_secret_0123456789" } };
      const answers = await Promise.all(Array.from({ length: 8 }, () => host.admin("POST", "/v1/admin/bots", bot)));
      statuses.push(...answers.map((a) => a.status));
      expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    }
    expect(statuses.filter((s) => s !== 201 && s !== 409)).toEqual([]);
  });

  it("answers 201 once and 409 for the rest when the same agent_id is POSTed concurrently, never 500", async () => {
    const reg = await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url });
    expect(reg.status).toBe(201);
    const statuses: number[] = [];
    for (let round = 0; round < 10; round++) {
      // Distinct scopes, so no binding conflict: only the agent id is shared.
      const agent = (i: number) => ({ agent_id: `race-agent-${round}`, name: "race", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: `race-${round}-${i}` } });
      const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => host.admin("POST", "/v1/admin/agents", agent(i))));
      statuses.push(...answers.map((a) => a.status));
    }
    expect(statuses.filter((s) => s !== 201 && s !== 409)).toEqual([]);
  });
});

describe("credentials inside a runner service's URL", () => {
  it("are refused (the runtime's fetch would not send them), and the refusal does not echo them", async () => {
    const password = "Pa55w0rdADMINsecret";
    const other = await startChatRunner("admin-races-2");
    try {
      for (const base_url of [other.url.replace("http://", `http://svc:${password}@`), `http://svc:${password}@127.0.0.1:1`]) {
        const refused = await host.admin("POST", "/v1/admin/runner-services", { base_url });
        expect([refused.status, refused.body.error.message]).toEqual([400, expect.stringMatching(/credentials in the URL/)]);
        expect(JSON.stringify(refused.body)).not.toContain(password);
      }
    } finally {
      await other.close();
    }
  });
});

