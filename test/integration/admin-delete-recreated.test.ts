import { beforeAll, describe, expect, it } from "vitest";
import { useAdminHost, type AdminHost } from "../support/admin-host";
import { holdNextQuery } from "../support/held-query";

/**
 * An agent DELETE reads the agent, then deletes it. Another DELETE and a POST of the same id landing in between made
 * the first DELETE remove the new agent (by id alone), while it cancelled only the old one's runs. It now removes only
 * the agent it read (its creation's epoch): gone already, it answers 404 and the new agent stays.
 */
const admin = useAdminHost();
const { agent } = admin;
let host: AdminHost["host"];
beforeAll(() => void ({ host } = admin));

describe("an agent DELETE whose agent was deleted and created anew meanwhile", () => {
  it("answers 404 and leaves the new agent and its binding untouched", async () => {
    const body = agent("racy", "beta", { type: "conversation", id: "racy" });
    expect((await host.admin("POST", "/v1/admin/agents", body)).status).toBe(201);
    // The first DELETE's write is held (its read done) while another DELETE and a POST of the same id land.
    const hold = holdNextQuery(host, 'delete from \\"agent\\"');
    const slow = host.admin("DELETE", "/v1/admin/agents/racy");
    await hold.heldFrom(slow);
    expect((await host.admin("DELETE", "/v1/admin/agents/racy")).status).toBe(200);
    const created = await host.admin("POST", "/v1/admin/agents", { ...body, description: "the new one" });
    expect(created.status).toBe(201);
    hold.release();
    const first = await slow;
    expect([first.status, first.body.error?.code]).toEqual([404, "not_found"]);
    const now = await host.admin("GET", "/v1/admin/agents/racy");
    expect([now.status, now.body.description]).toEqual([200, "the new one"]);
    // Still bound: an event of its conversation runs on it.
    const posted = await host.postEvent({ event_type: "message.received", conversation_id: "racy", actor: { actor_type: "user", actor_id: "u" }, input: { text: "hi" } });
    expect((await host.waitForRun(posted.body.run_id!)).message?.content).toBe("beta for racy");
  });
});
