import { beforeAll, describe, expect, it } from "vitest";
import { useAdminHost, type AdminHost } from "../support/admin-host";

/** A PUT of what GET answered carries the updated_at it read: a change made since is not overwritten by the older copy. */
const admin = useAdminHost();
const { agent } = admin;
let host: AdminHost["host"];
beforeAll(() => void ({ host } = admin));

describe("PUT of a copy read before another change", () => {
  it("agents: 409 naming the stored updated_at, nothing written; read again, it applies; without updated_at it replaces whatever changed", async () => {
    expect((await host.admin("POST", "/v1/admin/agents", agent("stale-a", "beta", { type: "conversation", id: "stale-a" }, { description: "first" }))).status).toBe(201);
    const copyA = (await host.admin("GET", "/v1/admin/agents/stale-a")).body;
    const copyB = (await host.admin("GET", "/v1/admin/agents/stale-a")).body;
    // Two operators edit what they read: the first write applies at once (same millisecond or not)...
    const first = await host.admin("PUT", "/v1/admin/agents/stale-a", { ...copyA, description: "by A" });
    expect(first.status).toBe(200);
    expect(Date.parse(first.body.updated_at)).toBeGreaterThan(Date.parse(copyA.updated_at));
    // ...the second, from a copy read before it, is refused rather than undoing it.
    const second = await host.admin("PUT", "/v1/admin/agents/stale-a", { ...copyB, description: "by B" });
    expect(second.status).toBe(409);
    expect(second.body.error).toMatchObject({ code: "conflict", details: { updated_at: first.body.updated_at } });
    expect(second.body.error.message).toMatch(/^agent stale-a was changed after the copy this body was read from/);
    expect((await host.admin("GET", "/v1/admin/agents/stale-a")).body.description).toBe("by A");
    // Read again, the edit applies.
    const fresh = (await host.admin("GET", "/v1/admin/agents/stale-a")).body;
    const again = await host.admin("PUT", "/v1/admin/agents/stale-a", { ...fresh, description: "by B" });
    expect([again.status, again.body.description]).toEqual([200, "by B"]);
    // A body built without updated_at (a config file) replaces whatever is stored, as before.
    const { updated_at: _u, created_at: _c, ...fromFile } = copyB;
    const pushed = await host.admin("PUT", "/v1/admin/agents/stale-a", { ...fromFile, description: "from file" });
    expect([pushed.status, pushed.body.description]).toEqual([200, "from file"]);
  });

  it("bots: the same for a bot's settings", async () => {
    const created = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", name: "stale bot", credentials: { bot_token: "777:STALE-copy-token", secret_token: "stale-copy-secret-1" } });
    expect(created.status).toBe(201);
    const botId = created.body.bot_id as string;
    const copyA = (await host.admin("GET", `/v1/admin/bots/${botId}`)).body;
    const copyB = (await host.admin("GET", `/v1/admin/bots/${botId}`)).body;
    expect((await host.admin("PUT", `/v1/admin/bots/${botId}`, { ...copyA, name: "renamed by A" })).status).toBe(200);
    const stale = await host.admin("PUT", `/v1/admin/bots/${botId}`, { ...copyB, workspace_id: "ws-by-b" });
    expect([stale.status, stale.body.error.code]).toEqual([409, "conflict"]);
    expect(JSON.stringify(stale.body)).not.toContain("STALE-copy-token");
    const shown = (await host.admin("GET", `/v1/admin/bots/${botId}`)).body;
    expect([shown.name, shown.workspace_id ?? null]).toEqual(["renamed by A", null]);
  });

  it("an updated_at that is no time at all is a 400 naming it, not a 409 saying the row changed; null is a 400 too", async () => {
    expect((await host.admin("POST", "/v1/admin/agents", agent("stale-typo", "beta", { type: "conversation", id: "stale-typo" }, { description: "kept" }))).status).toBe(201);
    const copy = (await host.admin("GET", "/v1/admin/agents/stale-typo")).body;
    for (const sent of ["yesterday", ""]) {
      const typo = await host.admin("PUT", "/v1/admin/agents/stale-typo", { ...copy, updated_at: sent, description: "typo" });
      expect([typo.status, typo.body.error.code]).toEqual([400, "invalid_request"]);
      expect(typo.body.error.message).toMatch(/^updated_at .* is not a time: send the updated_at a GET answered \(ISO 8601, such as /);
    }
    const blank = await host.admin("PUT", "/v1/admin/agents/stale-typo", { ...copy, updated_at: null, description: "typo" });
    expect([blank.status, blank.body.error.code]).toEqual([400, "invalid_request"]);
    expect(blank.body.error.message).toMatch(/updated_at/);
    expect((await host.admin("GET", "/v1/admin/agents/stale-typo")).body.description).toBe("kept");
    // The same instant written another way (an offset instead of Z) is the copy GET answered: it applies.
    const offset = copy.updated_at.replace(/Z$/, "+00:00");
    const same = await host.admin("PUT", "/v1/admin/agents/stale-typo", { ...copy, updated_at: offset, description: "same instant" });
    expect([same.status, same.body.description]).toEqual([200, "same instant"]);

    const created = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", credentials: { bot_token: "778:TYPO-copy-token", secret_token: "typo-copy-secret-1" } });
    const botCopy = (await host.admin("GET", `/v1/admin/bots/${created.body.bot_id}`)).body;
    const botTypo = await host.admin("PUT", `/v1/admin/bots/${created.body.bot_id}`, { ...botCopy, updated_at: "not-a-date", name: "typo" });
    expect([botTypo.status, botTypo.body.error.code]).toEqual([400, "invalid_request"]);
    expect(JSON.stringify(botTypo.body)).not.toContain("TYPO-copy-token");
  });

  it("what Date.parse reads as some time but no GET answers (a number, words ending in one, a time with no zone) is a 400 too, not a 409", async () => {
    expect((await host.admin("POST", "/v1/admin/agents", agent("stale-loose", "beta", { type: "conversation", id: "stale-loose" }, { description: "kept" }))).status).toBe(201);
    const copy = (await host.admin("GET", "/v1/admin/agents/stale-loose")).body;
    // The last is the stored instant itself, read in whatever zone the runtime is in.
    for (const sent of ["1", "x 1", "2026", copy.updated_at.replace(/Z$/, "")]) {
      const loose = await host.admin("PUT", "/v1/admin/agents/stale-loose", { ...copy, updated_at: sent, description: "loose" });
      expect([sent, loose.status, loose.body.error?.code]).toEqual([sent, 400, "invalid_request"]);
      expect(loose.body.error.message).toMatch(/^updated_at .* is not a time/);
    }
    expect((await host.admin("GET", "/v1/admin/agents/stale-loose")).body.description).toBe("kept");
  });
});
