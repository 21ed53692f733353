import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { stalledBody } from "../support/host-api";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * A cursor is opaque: one the host never issued is a 400, including one that
 * names the right listing with no position (`base64("e:")`) or a position
 * written otherwise than the host writes it (hex). Read as position 0, it
 * would silently end a page walk, or replay a run's whole ledger.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
const b64 = (s: string) => Buffer.from(s).toString("base64").replace(/=+$/, "");
const CONV = "cursor-empty";

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "cursors" });
  host = await startTestHost();
  await runner.register(host);
  await putAgent(host, { agent_id: "cursors", runner_id: runner.runnerId() });
  for (const text of ["one", "two"]) await host.waitForRun((await host.postEvent(messageEvent(CONV, text))).body.run_id!);
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("cursors without a position", () => {
  it("are refused with 400 by the operator reads, as any cursor the host never issued", async () => {
    const runId = (await host.admin("GET", `/v1/runs?conversation_id=${CONV}&limit=1`)).body.items[0].run_id;
    const statuses = {
      events: (await host.admin("GET", `/v1/conversations/events?conversation_id=${CONV}&cursor=${b64("e:")}`)).status,
      transcript: (await host.admin("GET", `/v1/conversations/transcript?conversation_id=${CONV}&cursor=${b64("t:")}`)).status,
      ledger: (await host.admin("GET", `/v1/runs/${runId}/events?cursor=${b64("r:")}`)).status,
      // Whitespace and hex are not positions the host writes either.
      transcriptHex: (await host.admin("GET", `/v1/conversations/transcript?conversation_id=${CONV}&cursor=${b64("t:0x2")}`)).status,
    };
    expect(statuses).toEqual({ events: 400, transcript: 400, ledger: 400, transcriptHex: 400 });
  });

  it("are refused with invalid_argument by history.page", async () => {
    const { result } = await runner.run(host, CONV, (api) => api("history.page", { before_cursor: b64("t:") }));
    expect(result.status).toBe(400);
  });
});

describe("empty cursors and limits not written in decimal", () => {
  it("are a 400 on every listing, not a read from the start or a page of another size", async () => {
    const runId = (await host.admin("GET", `/v1/runs?conversation_id=${CONV}&limit=1`)).body.items[0].run_id;
    const reads = [
      `/v1/runs/${runId}/events?cursor=`,
      `/v1/runs?cursor=`,
      `/v1/conversations/events?conversation_id=${CONV}&cursor=`,
      `/v1/admin/agents?cursor=`,
      ...["0x10", "1e1", "%201", "1.0", "", "-1"].flatMap((limit) => [
        `/v1/runs/${runId}/events?limit=${limit}`,
        `/v1/runs?limit=${limit}`,
        `/v1/conversations/transcript?conversation_id=${CONV}&limit=${limit}`,
        `/v1/admin/runners?limit=${limit}`,
      ]),
    ];
    const answers = await Promise.all(reads.map(async (path) => [path, (await host.admin("GET", path)).status] as const));
    expect(answers.filter(([, status]) => status !== 400)).toEqual([]);
    // Plain decimal still pages as asked.
    const page = await host.admin("GET", `/v1/conversations/transcript?conversation_id=${CONV}&limit=01`);
    expect([page.status, page.body.items.length, page.body.has_more]).toEqual([200, 1, true]);
  });
});

describe("a run-token route asked with another method", () => {
  it("answers 405 naming the method it takes, not the admin 401, in the §8 shape of every answer there", async () => {
    const runId = (await host.admin("GET", `/v1/runs?conversation_id=${CONV}&limit=1`)).body.items[0].run_id;
    const asked = await Promise.all(
      [["GET", "api"], ["PUT", "api"], ["GET", "artifacts"], ["POST", "artifacts"]].map(async ([method, route]) => {
        const res = await fetch(`${host.url}/v1/runs/${runId}/${route}`, { method, headers: { authorization: "Bearer whatever" } });
        // A runner's client reads `ok` and an AgentAPIError here as on any other Host API answer.
        const body = (await res.json()) as { ok: boolean; error: { code: string; retryable: boolean; details: Record<string, unknown> } };
        return [method, route, res.status, res.headers.get("allow"), body.ok, body.error.code, body.error.retryable, body.error.details];
      }),
    );
    expect(asked).toEqual([
      ["GET", "api", 405, "POST", false, "invalid_argument", false, { allow: "POST" }],
      ["PUT", "api", 405, "POST", false, "invalid_argument", false, { allow: "POST" }],
      ["GET", "artifacts", 405, "PUT", false, "invalid_argument", false, { allow: "PUT" }],
      ["POST", "artifacts", 405, "PUT", false, "invalid_argument", false, { allow: "PUT" }],
    ]);
  });

  it("drains a body still coming before the 405, as any refusal, so the client reads it instead of a reset", async () => {
    const runId = (await host.admin("GET", `/v1/runs?conversation_id=${CONV}&limit=1`)).body.items[0].run_id;
    const answers = [];
    for (const [method, route] of [["POST", "artifacts"], ["PUT", "api"]]) {
      const answer = await stalledBody(`${host.url}/v1/runs/${runId}/${route}`, { method, token: "some-token", declared: 512 * 1024, first: 64 * 1024, pauseMs: 300 });
      answers.push({ method, route, ...answer });
    }
    expect(answers).toEqual([
      { method: "POST", route: "artifacts", answeredDuringPause: false, status: 405 },
      { method: "PUT", route: "api", answeredDuringPause: false, status: 405 },
    ]);
  });
});
