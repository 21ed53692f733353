import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * Every admin listing is paged the same way: `?limit` (1 to 200, default
 * 100) and `?cursor` (the previous page's `next_cursor`), answered as
 * `{items, next_cursor?, has_more}`, oldest first (by name or id where a
 * listing has no creation time). Walking the pages yields every row once,
 * even when rows are added and removed between pages.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const RUNNERS = ["r1", "r2", "r3", "r4", "r5"];

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "lister",
    runners: RUNNERS.map((name) => ({ name, label: { en_US: name }, capabilities: {}, permissions: {} })),
    onRun: ({ body }, res) => resultWriter(res, body.context.run_id).reply("ok"),
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

type Page = { items: Record<string, unknown>[]; next_cursor?: string; has_more: boolean };

/** Every page of a listing, `between` running after each page but the last. */
async function walk(path: string, limit: number, between: (pageIndex: number) => Promise<void> = async () => {}): Promise<Page[]> {
  const pages: Page[] = [];
  for (let cursor: string | undefined; ; ) {
    const res = await host.admin<Page>("GET", `${path}?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    expect(res.status).toBe(200);
    pages.push(res.body);
    if (!res.body.has_more) {
      expect(res.body.next_cursor).toBeUndefined();
      return pages;
    }
    expect(res.body.items).toHaveLength(limit);
    cursor = res.body.next_cursor!;
    await between(pages.length - 1);
  }
}

const agent = (id: string) => ({ agent_id: id, name: id, runner_id: runner.runnerId("r1"), event_types: ["message.received"], scope: { type: "conversation", id: `conv-${id}` } });

describe("admin listings", () => {
  it("agents page in creation order; rows added or removed between pages neither repeat nor hide the others", async () => {
    // Ids in creation order too: agents created in the same millisecond are ordered by id.
    const ids = ["a-1", "a-2", "a-3", "a-4", "a-5"];
    for (const id of ids) expect((await host.admin("POST", "/v1/admin/agents", agent(id))).status).toBe(201);
    const pages = await walk("/v1/admin/agents", 2, async (i) => {
      if (i !== 0) return;
      // After the first page: one already listed goes, one not listed yet goes, a new one comes.
      expect((await host.admin("DELETE", "/v1/admin/agents/a-1")).status).toBe(200);
      expect((await host.admin("DELETE", "/v1/admin/agents/a-4")).status).toBe(200);
      expect((await host.admin("POST", "/v1/admin/agents", agent("a-6"))).status).toBe(201);
    });
    expect(pages.map((p) => p.items.map((a) => a.agent_id))).toEqual([["a-1", "a-2"], ["a-3", "a-5"], ["a-6"]]);
    // Without a limit: up to 100, in one page.
    const all = await host.admin<Page>("GET", "/v1/admin/agents");
    expect([all.body.items.map((a) => a.agent_id), all.body.has_more]).toEqual([["a-2", "a-3", "a-5", "a-6"], false]);
  });

  it("runners page by id, and runner services by creation", async () => {
    const pages = await walk("/v1/admin/runners", 2);
    expect(pages.flatMap((p) => p.items.map((r) => r.runner_id))).toEqual(RUNNERS.map((name) => runner.runnerId(name)));
    expect(pages).toHaveLength(3);
    const services = await walk("/v1/admin/runner-services", 1);
    expect(services.flatMap((p) => p.items.map((s) => s.base_url))).toEqual([runner.url]);
  });

  it("tools page by name", async () => {
    const names = ["t_c", "t_a", "t_b"];
    for (const name of names) expect((await host.admin("POST", "/v1/admin/tools", { name, description: name, endpoint: "http://127.0.0.1:9/tool" })).status).toBe(201);
    const pages = await walk("/v1/admin/tools", 1);
    expect(pages.flatMap((p) => p.items.map((t) => t.name))).toEqual(["t_a", "t_b", "t_c"]);
  });

  it("every listing refuses a bad limit, a foreign or forged cursor and an unknown parameter with 400", async () => {
    const listings = ["agents", "bots", "runners", "runner-services", "models", "tools", "mcp-servers", "knowledge-bases"];
    const agentsCursor = (await host.admin<Page>("GET", "/v1/admin/runners?limit=1")).body.next_cursor!;
    for (const name of listings) {
      const path = `/v1/admin/${name}`;
      const empty = await host.admin<Page>("GET", `${path}?limit=200`);
      expect([name, empty.status, Array.isArray(empty.body.items), typeof empty.body.has_more]).toEqual([name, 200, true, "boolean"]);
      for (const query of ["limit=0", "limit=201", "limit=two", "cursor=not-a-cursor", `cursor=${encodeURIComponent(agentsCursor)}`, "page=2"]) {
        if (name === "runners" && query.startsWith("cursor=") && query !== "cursor=not-a-cursor") continue; // its own cursor
        const res = await host.admin<{ error: { code: string; message: string } }>("GET", `${path}?${query}`);
        expect([name, query, res.status, typeof res.body.error?.message]).toEqual([name, query, 400, "string"]);
      }
    }
  });
});
