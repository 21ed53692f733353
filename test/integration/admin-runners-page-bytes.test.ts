import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * A page of `GET /v1/admin/runners` carries whole manifests: it is cut at
 * 4 MiB of them past its first runner (as the runs listing is), so 200 runners
 * of near-megabyte manifests never make one answer of 200 MiB. The rest comes
 * on the next pages, each runner once.
 */
let host: TestHost;
const services: Awaited<ReturnType<typeof startAdHocRunner>>[] = [];
const MANIFEST_TEXT = 900 * 1024;

beforeAll(async () => {
  host = await startTestHost();
  for (let i = 0; i < 6; i++) {
    const service = await startAdHocRunner({
      name: `big-${i}`,
      runners: [{ name: "default", label: { en_US: `big ${i}` }, description: { en_US: "x".repeat(MANIFEST_TEXT) }, capabilities: {}, permissions: {} }],
      onRun: ({ body }, res) => resultWriter(res, body.context.run_id).reply("ok"),
    });
    services.push(service);
    expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: service.url })).status).toBe(201);
  }
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all(services.map((s) => s.close()));
});

it("cuts a page of runners at 4 MiB of manifests, and the next page goes on from there", async () => {
  type Page = { items: { runner_id: string; manifest: { description: { en_US: string } } }[]; next_cursor?: string; has_more: boolean };
  const first = await host.admin<Page>("GET", "/v1/admin/runners?limit=200");
  expect(first.status).toBe(200);
  // 4 MiB holds four manifests of 900 KiB, not six.
  expect(first.body.items).toHaveLength(4);
  expect(first.body.has_more).toBe(true);
  expect(first.body.items.every((r) => r.manifest.description.en_US.length === MANIFEST_TEXT)).toBe(true);
  const second = await host.admin<Page>("GET", `/v1/admin/runners?limit=200&cursor=${encodeURIComponent(first.body.next_cursor!)}`);
  expect([second.body.items.length, second.body.has_more]).toEqual([2, false]);
  const ids = [...first.body.items, ...second.body.items].map((r) => r.runner_id);
  expect(ids).toEqual(services.map((s) => s.runnerId()).sort());
});
