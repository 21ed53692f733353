import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { stalledBody } from "../support/host-api";

/**
 * README "HTTP API": "A body refused before it was read (too large, bad run token) is drained, up to 4 MiB and 5 s,
 * before the answer, so the client reads the answer instead of a connection reset". host-api.test.ts checks this for
 * a wrong token on a real run; a call with no bearer at all, or naming a run id this host never issued, is refused
 * just as unread, and must be drained the same way.
 */
let host: TestHost;
beforeAll(async () => {
  host = await startTestHost();
});
afterAll(async () => {
  await host?.dispose();
});

const stalled = (runId: string, token: string) =>
  stalledBody(`${host.url}/v1/runs/${runId}/api`, { method: "POST", token, declared: 3 * 1024 * 1024, first: 64 * 1024, pauseMs: 300 });

describe("a Host API call refused before its body is read", () => {
  it("is drained when it carries no bearer token", async () => {
    // "Bearer " with nothing after it: no token at all.
    expect(await stalled("run_0123456789abcdef0123456789abcdef", "")).toEqual({ answeredDuringPause: false, status: 401 });
  });

  it("is drained when it names a run this host never issued", async () => {
    expect(await stalled("run_nope", "some-token")).toEqual({ answeredDuringPause: false, status: 401 });
  });
});

describe("an operator call refused for its bearer before its body is read", () => {
  it("is drained too, on the admin API and on POST /v1/events", async () => {
    for (const path of ["/v1/admin/agents", "/v1/events"]) {
      const answer = await stalledBody(`${host.url}${path}`, { method: "POST", token: "not-the-admin-token", declared: 512 * 1024, first: 64 * 1024, pauseMs: 300 });
      expect({ path, ...answer }).toEqual({ path, answeredDuringPause: false, status: 401 });
    }
  });
});
