import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeMcpServer } from "../support/fake-mcp";
import { deferred } from "../support/host-api";
import { startTestHost, type TestHost } from "../support/host";

/**
 * README "Host-held models, tools and knowledge bases": the operator's `PUT /{id}` of a model, HTTP tool, MCP server
 * or knowledge base, with the conventions of bots' and runner services' PUT: the body of POST or the GET view sent
 * back; a field left out cleared, credentials kept unless new ones are sent (or the mask GET shows); validation as
 * POST's, with exact numbers; only over the row as read (a concurrent DELETE: 404, a concurrent change: 409).
 */
const KEY = "sk-put-admin-7c1d9e2f4a";
const NEW_KEY = "sk-put-rotated-3b8e6a0d1c";
const TOKEN = "mcp-put-token-5e2a9c7f1b";
const ROTATED = "mcp-put-rotated-8d4b1f6e3a";
/** Read by the fake at each request: `beforeList` holds a discovery, `token` revokes a credential. */
const mcpOpts: { token: string; beforeList?: () => Promise<void> } = { token: TOKEN };

let host: TestHost;
let mcp: Awaited<ReturnType<typeof startFakeMcpServer>>;

beforeAll(async () => {
  mcp = await startFakeMcpServer(mcpOpts);
  host = await startTestHost({ captureLogs: true });
});
afterAll(async () => {
  await host?.dispose();
  await mcp?.close();
});

const model = (model_id: string, extra: Record<string, unknown> = {}) => ({ model_id, name: "Main", kind: "llm", base_url: "https://llm.example/v1", api_key: KEY, model: "gpt-x", context_window: 8192, ...extra });
const create = async (path: string, body: unknown) => {
  const res = await host.admin("POST", path, body);
  expect(res.status).toBe(201);
  return res.body;
};
/** The next `tools/list` is answered only once released; `reached` resolves when it arrives. */
function holdNextList() {
  const reached = deferred();
  const release = deferred();
  mcpOpts.beforeList = async () => {
    mcpOpts.beforeList = undefined;
    reached.resolve();
    await release.promise;
  };
  return { reached: reached.promise, release: release.resolve };
}

describe("PUT of a resource", () => {
  it("replaces what is sent, clears what is left out, keeps credentials left out or masked, and never shows them", async () => {
    await create("/v1/admin/models", model("m-put"));
    const stored = async () => (await host.query<{ api_key: string }>("SELECT api_key FROM model WHERE model_id = 'm-put'"))[0].api_key;
    const sealed = await stored();
    const put = await host.admin("PUT", "/v1/admin/models/m-put", { name: "Renamed", kind: "llm", base_url: "https://llm.example/v1", model: "gpt-y" });
    expect(put.status).toBe(200);
    expect(put.body).toEqual({ model_id: "m-put", name: "Renamed", kind: "llm", base_url: "https://llm.example/v1", model: "gpt-y", api_key: "********", created_at: expect.any(String), updated_at: expect.any(String) });
    expect(await stored()).toBe(sealed);
    const shown = (await host.admin("GET", "/v1/admin/models/m-put")).body;
    expect(shown).toEqual(put.body);
    const sentBack = await host.admin("PUT", "/v1/admin/models/m-put", shown);
    expect(sentBack.status).toBe(200);
    expect(await stored()).toBe(sealed);
    // From the copy the last PUT answered: the one GET answered before it is stale now.
    expect((await host.admin("PUT", "/v1/admin/models/m-put", { ...sentBack.body, api_key: NEW_KEY })).status).toBe(200);
    expect(await stored()).not.toBe(sealed);
    expect(await stored()).toMatch(/^sealed:v3:/);

    await create("/v1/admin/tools", { name: "t-put", description: "d", endpoint: "https://tool.example/run", headers: { "x-api-key": KEY, "x-tenant": "acme" } });
    const tool = (await host.admin("GET", "/v1/admin/tools/t-put")).body;
    const keptOne = await host.admin("PUT", "/v1/admin/tools/t-put", { ...tool, headers: { "x-api-key": "********" }, description: undefined });
    expect([keptOne.status, keptOne.body.headers, keptOne.body.description]).toEqual([200, { "x-api-key": "********" }, ""]);
    const headers = (await host.query<{ headers_json: string }>("SELECT headers_json FROM tool WHERE tool_name = 't-put'"))[0].headers_json;
    expect(Object.keys(JSON.parse(headers))).toEqual(["x-api-key"]);
    // Each from the copy the PUT before answered: the one GET answered before it is stale now.
    const cleared = await host.admin("PUT", "/v1/admin/tools/t-put", { ...keptOne.body, headers: {} });
    expect([cleared.status, cleared.body.headers]).toEqual([200, {}]);

    await create("/v1/admin/knowledge-bases", { kb_id: "kb-put", name: "KB", description: "docs", endpoint: "https://kb.example/search", api_key: KEY });
    const kbShown = (await host.admin("GET", "/v1/admin/knowledge-bases/kb-put")).body;
    const kb = await host.admin("PUT", "/v1/admin/knowledge-bases/kb-put", { ...kbShown, description: undefined });
    expect([kb.status, kb.body.description, kb.body.api_key]).toEqual([200, undefined, "********"]);
    const keyless = await host.admin("PUT", "/v1/admin/knowledge-bases/kb-put", { ...kb.body, api_key: null });
    expect([keyless.status, keyless.body.api_key]).toEqual([200, null]);

    expect(host.logs()).not.toContain(KEY);
    expect(host.logs()).not.toContain(NEW_KEY);
  });

  it("validates as POST does (exact numbers included), and saves nothing it refuses", async () => {
    await create("/v1/admin/models", model("m-bad"));
    await create("/v1/admin/tools", { name: "t-bad", endpoint: "https://tool.example/run", headers: { "x-api-key": KEY } });
    await create("/v1/admin/knowledge-bases", { kb_id: "kb-bad", name: "KB", endpoint: "https://kb.example/search" });
    const before = JSON.stringify(await host.query("SELECT * FROM model, tool, knowledge_base WHERE model_id = 'm-bad' AND tool_name = 't-bad' AND kb_id = 'kb-bad'"));
    const refusals: [string, unknown, RegExp][] = [
      ["/v1/admin/models/m-bad", model("m-bad", { kind: "rerank" }), /kind cannot change/],
      ["/v1/admin/models/m-bad", model("other"), /model_id other is not the model at this path/],
      ["/v1/admin/models/m-bad", model("m-bad", { name: undefined }), /name/],
      ["/v1/admin/models/m-bad", model("m-bad", { api_key: `${NEW_KEY}\r\nX-Injected: 1` }), /line break/],
      ["/v1/admin/models/m-bad", model("m-bad", { context_window: 1.5 }), /context_window/],
      ["/v1/admin/models/m-bad", model("m-bad", { base_url: `https://u:${NEW_KEY}@llm.example/v1` }), /credentials in the URL/],
      ["/v1/admin/models/m-bad", model("m-bad", { surprise: true }), /surprise/],
      ["/v1/admin/tools/t-bad", { name: "t-other", endpoint: "https://tool.example/run" }, /name t-other is not the tool at this path/],
      ["/v1/admin/tools/t-bad", { endpoint: "https://tool.example/run", parameters: { type: "string" } }, /JSON Schema of an object/],
      ["/v1/admin/tools/t-bad", { endpoint: "https://tool.example/run", headers: { "x-other": "********" } }, /no stored value to keep: x-other/],
      ["/v1/admin/tools/t-bad", { endpoint: "https://tool.example/run", source: "mcp" }, /source/],
      ["/v1/admin/knowledge-bases/kb-bad", { name: "KB", endpoint: "https://kb.example/search", api_key: "********" }, /no stored key to keep/],
      ["/v1/admin/knowledge-bases/kb-bad", { kb_id: "kb-x", name: "KB", endpoint: "https://kb.example/search" }, /kb_id kb-x is not/],
    ];
    for (const [path, body, message] of refusals) {
      const res = await host.admin("PUT", path, body);
      expect([path, res.status, res.body.error?.code, res.body.error?.message]).toEqual([path, 400, "invalid_request", expect.stringMatching(message)]);
      expect(JSON.stringify(res.body)).not.toContain(NEW_KEY);
    }
    // A whole number JSON parsing rounded (2^53 + 1) would be enforced as another bound: refused, not stored rounded.
    const raw = await fetch(`${host.url}/v1/admin/tools/t-bad`, {
      method: "PUT",
      headers: { authorization: `Bearer ${host.adminToken}`, "content-type": "application/json" },
      body: '{"endpoint":"https://tool.example/run","parameters":{"type":"object","properties":{"id":{"type":"integer","maximum":9007199254740993}}}}',
    });
    expect(raw.status).toBe(400);
    expect(JSON.stringify(await host.query("SELECT * FROM model, tool, knowledge_base WHERE model_id = 'm-bad' AND tool_name = 't-bad' AND kb_id = 'kb-bad'"))).toBe(before);
    // POST as PUT: a new tool with such a bound is refused too, not stored rounded.
    const posted = await fetch(`${host.url}/v1/admin/tools`, {
      method: "POST",
      headers: { authorization: `Bearer ${host.adminToken}`, "content-type": "application/json" },
      body: '{"name":"t-round","endpoint":"https://tool.example/run","parameters":{"type":"object","properties":{"id":{"type":"integer","minimum":-9007199254740993}}}}',
    });
    expect([posted.status, ((await posted.json()) as any).error?.message]).toEqual([400, expect.stringMatching(/9007199254740993/)]);
    expect(await host.query("SELECT tool_name FROM tool WHERE tool_name = 't-round'")).toEqual([]);

    // An MCP server's tool is changed through its server, as it is deleted through it.
    await create("/v1/admin/mcp-servers", { name: "calc", url: mcp.url, headers: { authorization: `Bearer ${TOKEN}` } });
    const mcpTool = await host.admin("PUT", "/v1/admin/tools/calc.add", { endpoint: "https://tool.example/run" });
    expect([mcpTool.status, mcpTool.body.error?.message]).toEqual([409, expect.stringMatching(/belongs to MCP server calc/)]);
    const misnamed = await host.admin("PUT", "/v1/admin/mcp-servers/calc", { name: "other", url: mcp.url });
    expect(misnamed.status).toBe(400);
  });

  it("refuses text the database gives back cut short (a NUL), at POST and PUT: a resource holding it could never be replaced, each PUT a 409", async () => {
    await create("/v1/admin/models", model("m-nul"));
    await create("/v1/admin/tools", { name: "t-nul", endpoint: "https://tool.example/run" });
    await create("/v1/admin/knowledge-bases", { kb_id: "kb-nul", name: "KB", endpoint: "https://kb.example/search" });
    const kb = { name: "KB", endpoint: "https://kb.example/search" };
    const refusals: [string, string, unknown][] = [
      ["POST", "/v1/admin/models", model("m-nul-new", { name: "a\u0000b" })],
      ["PUT", "/v1/admin/models/m-nul", model("m-nul", { name: "a\u0000b" })],
      ["PUT", "/v1/admin/models/m-nul", model("m-nul", { model: "gpt\u0000x" })],
      ["POST", "/v1/admin/tools", { name: "t-nul-new", description: "x\u0000y", endpoint: "https://tool.example/run" }],
      ["PUT", "/v1/admin/tools/t-nul", { description: "x\u0000y", endpoint: "https://tool.example/run" }],
      ["PUT", "/v1/admin/knowledge-bases/kb-nul", { ...kb, name: "K\u0000B" }],
      ["PUT", "/v1/admin/knowledge-bases/kb-nul", { ...kb, description: "d\u0000" }],
    ];
    for (const [method, path, body] of refusals) {
      const res = await host.admin(method, path, body);
      expect([method, path, res.status, res.body.error?.message]).toEqual([method, path, 400, expect.stringMatching(/NUL/)]);
    }
    const replaced = [
      await host.admin("PUT", "/v1/admin/models/m-nul", model("m-nul", { name: "renamed" })),
      await host.admin("PUT", "/v1/admin/tools/t-nul", { description: "fixed", endpoint: "https://tool.example/run" }),
      await host.admin("PUT", "/v1/admin/knowledge-bases/kb-nul", { ...kb, description: "fixed" }),
    ];
    expect(replaced.map((r) => r.status)).toEqual([200, 200, 200]);
  });

  it("answers 404 for a resource that does not exist, of each kind", async () => {
    await create("/v1/admin/models", model("m-404"));
    expect((await host.admin("PUT", "/v1/admin/models/m-404", model("m-404"))).status).toBe(200);
    const absent: [string, unknown, string][] = [
      ["/v1/admin/models/nope", model("nope"), "model nope not found"],
      ["/v1/admin/tools/nope", { endpoint: "https://tool.example/run" }, "tool nope not found"],
      ["/v1/admin/mcp-servers/nope", { url: mcp.url }, "MCP server nope not found"],
      ["/v1/admin/knowledge-bases/nope", { name: "n", endpoint: "https://kb.example/search" }, "knowledge base nope not found"],
    ];
    for (const [path, body, message] of absent) expect(await host.admin("PUT", path, body)).toEqual({ status: 404, body: { error: { code: "not_found", message } } });
  });
});

describe("PUT racing DELETE or another PUT", () => {
  it("a PUT racing a DELETE answers 200 only when it updated the row, else 404, and never brings the resource back", async () => {
    await host.query("CREATE TABLE IF NOT EXISTS put_updates (id TEXT)");
    await host.query("CREATE TRIGGER IF NOT EXISTS put_model_updated AFTER UPDATE ON model BEGIN INSERT INTO put_updates VALUES (NEW.model_id); END");
    // Unraced, a PUT updates the row.
    await create("/v1/admin/models", model("race-alone"));
    expect((await host.admin("PUT", "/v1/admin/models/race-alone", model("race-alone", { api_key: NEW_KEY }))).status).toBe(200);
    expect(await host.query("SELECT id FROM put_updates")).toEqual([{ id: "race-alone" }]);
    const wrong: string[] = [];
    for (let i = 0; i < 15; i++) {
      const id = `race-del-${i}`;
      await create("/v1/admin/models", model(id));
      const [put, del] = await Promise.all([host.admin("PUT", `/v1/admin/models/${id}`, model(id, { api_key: NEW_KEY })), host.admin("DELETE", `/v1/admin/models/${id}`)]);
      const updated = (await host.query("SELECT 1 FROM put_updates WHERE id = ?", [id])).length > 0;
      const left = (await host.query("SELECT 1 FROM model WHERE model_id = ?", [id])).length;
      if (![200, 404].includes(put.status) || (put.status === 200) !== updated || del.status !== 204 || left) wrong.push(`${id}: PUT ${put.status} (row updated: ${updated}), DELETE ${del.status}, rows left ${left}`);
    }
    expect(wrong).toEqual([]);
  });

  it("a PUT that sends no key never restores the key a concurrent PUT rotated: the later write over the same read is a 409", async () => {
    let rotations = 0;
    const restored: string[] = [];
    for (let i = 0; i < 15; i++) {
      const id = `race-put-${i}`;
      await create("/v1/admin/models", model(id));
      const original = (await host.query<{ api_key: string }>("SELECT api_key FROM model WHERE model_id = ?", [id]))[0].api_key;
      // Renames in flight around the rotation (two alone seldom overlap).
      const [rotate, ...renames] = await Promise.all([
        host.admin("PUT", `/v1/admin/models/${id}`, model(id, { api_key: NEW_KEY })),
        ...Array.from({ length: 5 }, (_, n) => host.admin("PUT", `/v1/admin/models/${id}`, model(id, { name: `renamed ${n}`, api_key: undefined }))),
      ]);
      expect([rotate, ...renames].map((a) => a.status).filter((s) => s !== 200 && s !== 409)).toEqual([]);
      if (rotate.status !== 200) continue;
      rotations++;
      const now = (await host.query<{ api_key: string }>("SELECT api_key FROM model WHERE model_id = ?", [id]))[0].api_key;
      if (now === original) restored.push(`${id}: rotation answered 200, renames ${renames.map((a) => a.status).join(",")}, and the old key is stored again`);
    }
    expect(restored).toEqual([]);
    expect(rotations).toBeGreaterThan(0);
  });

  it("an MCP server's PUT saves nothing when the server is deleted (404) or changed (409) while its tools are listed", async () => {
    await create("/v1/admin/mcp-servers", { name: "held", url: mcp.url, headers: { authorization: `Bearer ${TOKEN}` } });
    const storedHeaders = async () => (await host.query<{ headers_json: string }>("SELECT headers_json FROM mcp_server WHERE name = 'held'"))[0]?.headers_json;

    let hold = holdNextList();
    const changed = host.admin("PUT", "/v1/admin/mcp-servers/held", { url: mcp.url, headers: { authorization: `Bearer ${TOKEN}`, "x-first": "1" } });
    await hold.reached;
    const second = await host.admin("PUT", "/v1/admin/mcp-servers/held", { url: mcp.url, headers: { authorization: `Bearer ${TOKEN}`, "x-second": "2" } });
    expect(second.status).toBe(200);
    const afterSecond = await storedHeaders();
    hold.release();
    expect((await changed).status).toBe(409);
    expect(await storedHeaders()).toBe(afterSecond);

    // A refresh under way when the key is rotated does not put the old key back.
    hold = holdNextList();
    const refresh = host.admin("POST", "/v1/admin/mcp-servers/held/refresh");
    await hold.reached;
    const rotated = await host.admin("PUT", "/v1/admin/mcp-servers/held", { url: mcp.url, headers: { authorization: `Bearer ${ROTATED}` } });
    expect(rotated.status).toBe(502); // the server does not know the new token yet: nothing saved
    mcpOpts.token = ROTATED;
    const accepted = await host.admin("PUT", "/v1/admin/mcp-servers/held", { url: mcp.url, headers: { authorization: `Bearer ${ROTATED}` } });
    expect(accepted.status).toBe(200);
    const afterRotation = await storedHeaders();
    hold.release();
    expect((await refresh).status).toBe(409);
    expect(await storedHeaders()).toBe(afterRotation);
    expect(JSON.stringify([rotated.body, accepted.body])).not.toContain(ROTATED);

    hold = holdNextList();
    const deleted = host.admin("PUT", "/v1/admin/mcp-servers/held", { url: mcp.url });
    await hold.reached;
    expect((await host.admin("DELETE", "/v1/admin/mcp-servers/held")).status).toBe(204);
    hold.release();
    expect(await deleted).toEqual({ status: 404, body: { error: { code: "not_found", message: expect.stringMatching(/deleted while its tools were listed/) } } });
    expect(await storedHeaders()).toBeUndefined();
    mcpOpts.token = TOKEN;
  });
});
