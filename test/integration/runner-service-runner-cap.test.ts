import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { listenLoopback, type LoopbackServer } from "../support/http-server";

/**
 * A manifest lists at most 100 runners (README, HTTP API): one listing more is refused whole with a 502 naming the
 * count, registering nothing, and a refresh to it keeps the runners registered before. Exactly 100 register.
 */
const MAX = 100;
let host: TestHost;
let service: LoopbackServer;
/** How many runners the service's manifest lists right now. */
let listed = MAX + 1;

const manifest = (count: number) => ({
  protocol: "agent-runner/v1",
  author: "tests",
  name: "many-runners",
  version: "1",
  runners: Array.from({ length: count }, (_, i) => ({ name: `r${i}`, label: { en_US: `r${i}` } })),
});

beforeAll(async () => {
  service = await listenLoopback((_req, res) => void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(manifest(listed))));
  host = await startTestHost();
});
afterAll(async () => {
  await host?.dispose();
  await service?.close();
});

const registered = async () => (await host.query<{ runner_id: string }>("SELECT runner_id FROM runner WHERE runner_id LIKE 'http:tests/many-runners/%'")).length;

describe("runners per manifest", () => {
  it("refuses a manifest listing more than 100 runners whole, registers one of exactly 100, and a refresh past the cap keeps them", async () => {
    listed = MAX + 1;
    const refused = await host.admin("POST", "/v1/admin/runner-services", { base_url: service.url });
    expect([refused.status, refused.body.error.code]).toEqual([502, "bad_gateway"]);
    expect(refused.body.error.message).toBe(`${service.url}/manifest lists ${MAX + 1} runners, more than the ${MAX} a manifest may list: nothing was registered`);
    expect(refused.body.error.details).toEqual({ runner_count: MAX + 1, max_runners: MAX });
    expect(await registered()).toBe(0);
    expect(await host.query("SELECT service_id FROM runner_service")).toEqual([]);

    listed = MAX;
    const created = await host.admin("POST", "/v1/admin/runner-services", { base_url: service.url });
    expect(created.status).toBe(201);
    expect(created.body.registered).toHaveLength(MAX);
    expect(await registered()).toBe(MAX);

    listed = 5000;
    const refresh = await host.admin("POST", `/v1/admin/runner-services/${created.body.service.service_id}/refresh`);
    expect([refresh.status, refresh.body.error.details]).toEqual([502, { runner_count: 5000, max_runners: MAX }]);
    expect(await registered()).toBe(MAX);
  });
});
