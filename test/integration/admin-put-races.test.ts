import { beforeAll, describe, expect, it } from "vitest";
import { useAdminHost, type AdminHost } from "../support/admin-host";
import { holdNextQuery } from "../support/held-query";

/**
 * A PUT reads the agent or bot, then writes over it as read. Each race below is made to happen in one order: the PUT's
 * write is held (its read done) while other calls land, then let through.
 */
const admin = useAdminHost();
const { agent } = admin;
let host: AdminHost["host"];
beforeAll(() => void ({ host } = admin));

describe("a PUT whose agent or bot was deleted and created anew under its id meanwhile", () => {
  it("agent: a 404, as for a DELETE, the new agent left as it is (was a 409 saying to read it again)", async () => {
    const body = agent("put-racy", "beta", { type: "conversation", id: "put-racy" }, { description: "the old one" });
    expect((await host.admin("POST", "/v1/admin/agents", body)).status).toBe(201);
    const hold = holdNextQuery(host, 'update \\"agent\\" set');
    const slow = host.admin("PUT", "/v1/admin/agents/put-racy", { ...body, description: "edited from the old one" });
    await hold.heldFrom(slow);
    expect((await host.admin("DELETE", "/v1/admin/agents/put-racy")).status).toBe(200);
    expect((await host.admin("POST", "/v1/admin/agents", { ...body, description: "the new one" })).status).toBe(201);
    hold.release();
    const put = await slow;
    expect([put.status, put.body.error?.code]).toEqual([404, "not_found"]);
    expect(put.body.error.message).toMatch(/^agent put-racy not found \(deleted meanwhile\)/);
    expect((await host.admin("GET", "/v1/admin/agents/put-racy")).body.description).toBe("the new one");
  });

  it("bot: a 404, the new bot left as it is", async () => {
    const credentials = { bot_token: "779:PUT-racy-token", secret_token: "put-racy-secret-1" };
    expect((await host.admin("POST", "/v1/admin/bots", { bot_id: "put-racy-bot", platform: "telegram", name: "old", credentials })).status).toBe(201);
    const hold = holdNextQuery(host, 'update \\"bot\\" set');
    const slow = host.admin("PUT", "/v1/admin/bots/put-racy-bot", { name: "edited from the old one" });
    await hold.heldFrom(slow);
    expect((await host.admin("DELETE", "/v1/admin/bots/put-racy-bot")).status).toBe(204);
    expect((await host.admin("POST", "/v1/admin/bots", { bot_id: "put-racy-bot", platform: "telegram", name: "new", credentials })).status).toBe(201);
    hold.release();
    const put = await slow;
    expect([put.status, put.body.error?.code]).toEqual([404, "not_found"]);
    expect(JSON.stringify(put.body)).not.toContain("PUT-racy-token");
    expect((await host.admin("GET", "/v1/admin/bots/put-racy-bot")).body.name).toBe("new");
  });
});

describe("a PUT whose write another PUT beat", () => {
  it("is a 409 naming the stored updated_at, as a stale copy's is", async () => {
    const body = agent("put-beaten", "beta", { type: "conversation", id: "put-beaten" });
    expect((await host.admin("POST", "/v1/admin/agents", body)).status).toBe(201);
    const copy = (await host.admin("GET", "/v1/admin/agents/put-beaten")).body;
    // The copy is current when the slow PUT checks it; the other PUT lands between that check and its write.
    const hold = holdNextQuery(host, 'update \\"agent\\" set');
    const slow = host.admin("PUT", "/v1/admin/agents/put-beaten", { ...copy, description: "slow" });
    await hold.heldFrom(slow);
    const first = await host.admin("PUT", "/v1/admin/agents/put-beaten", { ...copy, description: "first" });
    expect(first.status).toBe(200);
    hold.release();
    const beaten = await slow;
    expect(beaten.status).toBe(409);
    expect(beaten.body.error).toMatchObject({ code: "conflict", details: { updated_at: first.body.updated_at } });
    expect((await host.admin("GET", "/v1/admin/agents/put-beaten")).body.description).toBe("first");

    const created = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", credentials: { bot_token: "780:BEATEN-token", secret_token: "beaten-copy-secret-1" } });
    expect(created.status).toBe(201);
    const botPath = `/v1/admin/bots/${created.body.bot_id}`;
    const botCopy = (await host.admin("GET", botPath)).body;
    const botHold = holdNextQuery(host, 'update \\"bot\\" set');
    const botSlow = host.admin("PUT", botPath, { ...botCopy, name: "slow" });
    await botHold.heldFrom(botSlow);
    const botFirst = await host.admin("PUT", botPath, { ...botCopy, name: "first" });
    expect(botFirst.status).toBe(200);
    botHold.release();
    const botBeaten = await botSlow;
    expect(botBeaten.status).toBe(409);
    expect(botBeaten.body.error).toMatchObject({ code: "conflict", details: { updated_at: botFirst.body.updated_at } });
  });
});
