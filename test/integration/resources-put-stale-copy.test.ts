import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { startFakeMcpServer } from "../support/fake-mcp";
import { holdNextQuery } from "../support/held-query";

/**
 * Runner services, models, tools, MCP servers and knowledge bases, as agents and bots: each view shows `updated_at`,
 * later at each PUT; a PUT of what GET answered carrying it applies only if nothing changed since (409 naming the
 * stored one), one that is not a time is a 400, and a body without it replaces whatever changed.
 */
const MCP_TOKEN = "stale-copy-mcp-token-0123456789";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let mcp: Awaited<ReturnType<typeof startFakeMcpServer>>;
beforeAll(async () => {
  runner = await startAdHocRunner({ name: "stale", runners: [{ name: "one", label: { en_US: "One" } }], onRun: ({ body }, res) => resultWriter(res, body.context.run_id).reply("ok") });
  mcp = await startFakeMcpServer({ token: MCP_TOKEN });
  host = await startTestHost();
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await mcp?.close();
});

interface Kind {
  /** The item's path, once created. */
  path: string;
  /** The listing it is an item of, and how to find it there. */
  listing: string;
  isIt: (item: any) => boolean;
  /** Two edits of a copy, each a change GET then shows (`shows`). */
  edit: (copy: any, which: "A" | "B") => Record<string, unknown>;
  shows: (view: any) => unknown;
}

/** The contract, for one resource already created. */
async function checkStaleCopies(kind: Kind) {
  const copyA = (await host.admin("GET", kind.path)).body;
  const copyB = (await host.admin("GET", kind.path)).body;
  expect(copyA.updated_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  const listed = (await host.admin("GET", `${kind.listing}?limit=200`)).body.items.find(kind.isIt);
  expect(listed.updated_at).toBe(copyA.updated_at);

  const first = await host.admin("PUT", kind.path, kind.edit(copyA, "A"));
  expect(first.status).toBe(200);
  const afterA = (await host.admin("GET", kind.path)).body;
  expect(Date.parse(afterA.updated_at)).toBeGreaterThan(Date.parse(copyA.updated_at));
  // The PUT's own answer is the copy to send next.
  expect((first.body.service ?? first.body).updated_at).toBe(afterA.updated_at);

  const stale = await host.admin("PUT", kind.path, kind.edit(copyB, "B"));
  expect([stale.status, stale.body.error?.code, stale.body.error?.details]).toEqual([409, "conflict", { updated_at: afterA.updated_at }]);
  expect(stale.body.error.message).toMatch(/was changed after the copy this body was read from/);
  expect(kind.shows((await host.admin("GET", kind.path)).body)).toEqual(kind.shows(afterA));

  for (const notATime of ["1", "yesterday"]) {
    const typo = await host.admin("PUT", kind.path, { ...kind.edit(afterA, "B"), updated_at: notATime });
    expect([notATime, typo.status, typo.body.error?.code]).toEqual([notATime, 400, "invalid_request"]);
  }

  const { updated_at: _left, ...fromFile } = kind.edit(copyB, "B");
  const pushed = await host.admin("PUT", kind.path, fromFile);
  expect(pushed.status).toBe(200);
  const afterB = (await host.admin("GET", kind.path)).body;
  expect(kind.shows(afterB)).not.toEqual(kind.shows(afterA));
  expect(Date.parse(afterB.updated_at)).toBeGreaterThan(Date.parse(afterA.updated_at));
}

describe("a PUT of a copy read before another change", () => {
  it("runner services; a refresh keeps updated_at", async () => {
    const created = await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url });
    expect(created.status).toBe(201);
    const id = created.body.service.service_id as string;
    expect(created.body.service.updated_at).toBeDefined();
    const path = `/v1/admin/runner-services/${id}`;
    // A refresh changes nothing the operator set: a copy read before it still applies.
    const before = (await host.admin("GET", path)).body;
    expect((await host.admin("POST", `${path}/refresh`)).status).toBe(200);
    expect((await host.admin("GET", path)).body.updated_at).toBe(before.updated_at);
    await checkStaleCopies({
      path,
      listing: "/v1/admin/runner-services",
      isIt: (s) => s.service_id === id,
      edit: (copy, which) => ({ ...copy, secret: which === "A" ? "secret-of-edit-A-0123456789" : null }),
      shows: (view) => view.has_secret,
    });
  });

  it("models", async () => {
    const created = await host.admin("POST", "/v1/admin/models", { model_id: "stale-m", name: "Chat", kind: "llm", base_url: "http://127.0.0.1:9/v1", api_key: "sk-stale-copy", model: "m" });
    expect([created.status, created.body.updated_at]).toEqual([201, created.body.created_at]);
    await checkStaleCopies({ path: "/v1/admin/models/stale-m", listing: "/v1/admin/models", isIt: (m) => m.model_id === "stale-m", edit: (copy, which) => ({ ...copy, name: `by ${which}` }), shows: (v) => v.name });
  });

  it("HTTP tools, and an MCP server's tools show theirs", async () => {
    const created = await host.admin("POST", "/v1/admin/tools", { name: "stale_tool", description: "first", endpoint: "http://127.0.0.1:9/tool" });
    expect([created.status, created.body.updated_at]).toEqual([201, created.body.created_at]);
    await checkStaleCopies({ path: "/v1/admin/tools/stale_tool", listing: "/v1/admin/tools", isIt: (t) => t.name === "stale_tool", edit: (copy, which) => ({ ...copy, description: `by ${which}` }), shows: (v) => v.description });
  });

  it("MCP servers: refused before its tools are listed; a refresh keeps updated_at", async () => {
    const created = await host.admin("POST", "/v1/admin/mcp-servers", { name: "stale_mcp", url: `${mcp.url}/first`, headers: { authorization: `Bearer ${MCP_TOKEN}` } });
    expect([created.status, created.body.updated_at]).toEqual([201, created.body.created_at]);
    const tool = (await host.admin("GET", "/v1/admin/tools/stale_mcp.add")).body;
    expect(tool.updated_at).toMatch(/^\d{4}-/);
    const before = (await host.admin("GET", "/v1/admin/mcp-servers/stale_mcp")).body;
    expect((await host.admin("POST", "/v1/admin/mcp-servers/stale_mcp/refresh")).status).toBe(200);
    expect((await host.admin("GET", "/v1/admin/mcp-servers/stale_mcp")).body.updated_at).toBe(before.updated_at);
    const listsBefore = mcp.calls.filter((c) => c.method === "tools/list").length;
    await checkStaleCopies({
      path: "/v1/admin/mcp-servers/stale_mcp",
      listing: "/v1/admin/mcp-servers",
      isIt: (s) => s.name === "stale_mcp",
      edit: (copy, which) => ({ ...copy, url: `${mcp.url}/by-${which}` }),
      shows: (v) => v.url,
    });
    // Listed for the two PUTs that applied, not for those refused.
    expect(mcp.calls.filter((c) => c.method === "tools/list").length - listsBefore).toBe(2);
  });

  it("knowledge bases", async () => {
    const created = await host.admin("POST", "/v1/admin/knowledge-bases", { kb_id: "stale-kb", name: "Docs", endpoint: "http://127.0.0.1:9/search" });
    expect([created.status, created.body.updated_at]).toEqual([201, created.body.created_at]);
    await checkStaleCopies({ path: "/v1/admin/knowledge-bases/stale-kb", listing: "/v1/admin/knowledge-bases", isIt: (k) => k.kb_id === "stale-kb", edit: (copy, which) => ({ ...copy, name: `by ${which}` }), shows: (v) => v.name });
  });
});

describe("a resource stored before it had an updated_at (migration 0028)", () => {
  it("shows its created_at as updated_at, and a PUT of that copy applies, giving it a later one", async () => {
    const created = await host.admin("POST", "/v1/admin/models", { model_id: "old-m", name: "Old", kind: "llm", base_url: "http://127.0.0.1:9/v1", api_key: "sk-old", model: "m" });
    expect(created.status).toBe(201);
    // As the release before the migration left it, or the previous Worker wrote it until the deploy.
    await host.query("UPDATE model SET updated_at = NULL WHERE model_id = 'old-m'");
    const copy = (await host.admin("GET", "/v1/admin/models/old-m")).body;
    expect(copy.updated_at).toBe(copy.created_at);
    const put = await host.admin("PUT", "/v1/admin/models/old-m", { ...copy, name: "Old, edited" });
    expect([put.status, put.body.name]).toEqual([200, "Old, edited"]);
    expect(Date.parse(put.body.updated_at)).toBeGreaterThan(Date.parse(copy.created_at));
    expect((await host.admin("PUT", "/v1/admin/models/old-m", { ...copy, name: "stale" })).status).toBe(409);
  });
});

describe("a resource PUT whose write another PUT beat", () => {
  it("is a 409 naming the stored updated_at", async () => {
    expect((await host.admin("POST", "/v1/admin/models", { model_id: "beaten-m", name: "B", kind: "llm", base_url: "http://127.0.0.1:9/v1", api_key: "sk-beaten", model: "m" })).status).toBe(201);
    const copy = (await host.admin("GET", "/v1/admin/models/beaten-m")).body;
    const hold = holdNextQuery(host, 'update \\"model\\" set');
    const slow = host.admin("PUT", "/v1/admin/models/beaten-m", { ...copy, name: "slow" });
    await hold.heldFrom(slow);
    const first = await host.admin("PUT", "/v1/admin/models/beaten-m", { ...copy, name: "first" });
    expect(first.status).toBe(200);
    hold.release();
    const beaten = await slow;
    expect([beaten.status, beaten.body.error?.details]).toEqual([409, { updated_at: first.body.updated_at }]);
  });

  it("runner services too (they were saved over whatever another PUT had written since their read)", async () => {
    const id = (await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).body.service.service_id as string;
    const path = `/v1/admin/runner-services/${id}`;
    const hold = holdNextQuery(host, 'update \\"runner_service\\" set');
    // Its read done, its manifest fetched, its save held while another PUT gives the service a new secret.
    const slow = host.admin("PUT", path, { base_url: runner.url, secret: null });
    await hold.heldFrom(slow);
    const first = await host.admin("PUT", path, { base_url: runner.url, secret: "secret-of-the-first-0123456789" });
    expect(first.status).toBe(200);
    hold.release();
    const beaten = await slow;
    expect([beaten.status, beaten.body.error?.details]).toEqual([409, { updated_at: first.body.service.updated_at }]);
    expect((await host.admin("GET", path)).body.has_secret).toBe(true);
  });
});

describe("a resource PUT or refresh whose resource was deleted and created anew under its id meanwhile", () => {
  /** The PUT (or refresh) `slow` read the first one; its write is held while a DELETE and a POST of the same id land. */
  async function raced(opts: { path: string; create: Record<string, unknown>; collection: string; update: string; slow: () => Promise<{ status: number; body: any }> }) {
    expect((await host.admin("POST", opts.collection, opts.create)).status).toBe(201);
    const hold = holdNextQuery(host, `update \\"${opts.update}\\" set`);
    const slow = opts.slow();
    await hold.heldFrom(slow);
    expect((await host.admin("DELETE", opts.path)).status).toBe(204);
    const anew = await host.admin("POST", opts.collection, opts.create);
    expect(anew.status).toBe(201);
    hold.release();
    return { answer: await slow, anew: (await host.admin("GET", opts.path)).body };
  }

  it("is a 404, as for agents and bots, the new one left as it is (was a 409 naming the new one's updated_at)", async () => {
    const model = { model_id: "racy-m", name: "the old one", kind: "llm", base_url: "http://127.0.0.1:9/v1", api_key: "sk-racy", model: "m" };
    const m = await raced({ path: "/v1/admin/models/racy-m", collection: "/v1/admin/models", update: "model", create: model, slow: () => host.admin("PUT", "/v1/admin/models/racy-m", { ...model, name: "edited" }) });
    expect([m.answer.status, m.answer.body.error?.code, m.anew.name]).toEqual([404, "not_found", "the old one"]);

    const tool = { name: "racy_tool", description: "the old one", endpoint: "http://127.0.0.1:9/tool" };
    const t = await raced({ path: "/v1/admin/tools/racy_tool", collection: "/v1/admin/tools", update: "tool", create: tool, slow: () => host.admin("PUT", "/v1/admin/tools/racy_tool", { ...tool, description: "edited" }) });
    expect([t.answer.status, t.answer.body.error?.code, t.anew.description]).toEqual([404, "not_found", "the old one"]);

    const kb = { kb_id: "racy-kb", name: "the old one", endpoint: "http://127.0.0.1:9/search" };
    const k = await raced({ path: "/v1/admin/knowledge-bases/racy-kb", collection: "/v1/admin/knowledge-bases", update: "knowledge_base", create: kb, slow: () => host.admin("PUT", "/v1/admin/knowledge-bases/racy-kb", { ...kb, name: "edited" }) });
    expect([k.answer.status, k.answer.body.error?.code, k.anew.name]).toEqual([404, "not_found", "the old one"]);
  });

  it("MCP servers: a PUT and a refresh are a 404, the new server left where it was registered", async () => {
    const server = { name: "racy_mcp", url: `${mcp.url}/old`, headers: { authorization: `Bearer ${MCP_TOKEN}` } };
    const path = "/v1/admin/mcp-servers/racy_mcp";
    const put = await raced({ path, collection: "/v1/admin/mcp-servers", update: "mcp_server", create: server, slow: () => host.admin("PUT", path, { ...server, url: `${mcp.url}/edited` }) });
    expect([put.answer.status, put.answer.body.error?.code, put.anew.url]).toEqual([404, "not_found", `${mcp.url}/old`]);
    expect(JSON.stringify(put.answer.body)).not.toContain(MCP_TOKEN);
    expect((await host.admin("DELETE", path)).status).toBe(204);

    const refresh = await raced({ path, collection: "/v1/admin/mcp-servers", update: "mcp_server", create: server, slow: () => host.admin("POST", `${path}/refresh`) });
    expect([refresh.answer.status, refresh.answer.body.error?.code]).toEqual([404, "not_found"]);
    expect(refresh.answer.body.error.message).toMatch(/deleted while its tools were listed/);
  });
});
