import { beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/fake-platform";
import { useSlackPlatform } from "../support/slack-platform";

/**
 * Slack sends one `member_joined_channel` event per member: a 300-person user group added to a channel is 300 events
 * within seconds. They are welcomed once, as Telegram's and Lark's joins together are: the first join's run waits for
 * the others, which join it (`merged`, `metadata.joined_with`), its event naming them all.
 */
const slack = useSlackPlatform();
const MEMBERS = 300;

beforeAll(async () => {
  await slack.host.bind({ baseUrl: slack.runner.url, runnerId: slack.runner.runnerId(), agentId: "slack-joins-welcome", scope: { type: "bot", id: slack.botId }, eventTypes: ["group.member_joined"] });
});

const joined = (channel: string, user: string) => slack.callback({ type: "member_joined_channel", user, channel, channel_type: "C", inviter: "U42", team: "T1" });
const joinsOf = (channel: string) =>
  slack.host.query<{ event_id: string; actor_id: string; disposition: string; run_id: string | null; metadata_json: string; data_json: string }>(
    "SELECT event_id, actor_id, disposition, run_id, metadata_json, data_json FROM event_log WHERE conversation_id = ? AND event_type = 'group.member_joined' ORDER BY seq",
    [channel],
  );
const runsIn = (channel: string) => slack.runner.contexts.filter((c) => c.conversation.conversation_id === channel);
const welcomesIn = (channel: string) => slack.postsTo(channel);

describe("Slack members joining a channel together", () => {
  it("a burst of joins (a user group added) is welcomed once, its event naming them all; each join recorded by its answer, merged into it", async () => {
    const users = Array.from({ length: MEMBERS }, (_, i) => `UG${String(i).padStart(4, "0")}`);
    // The bot added with them: its own join is no member's.
    expect((await slack.post(joined("CJOIN1", slack.BOT_USER))).status).toBe(200);
    // A join to another channel meanwhile is that channel's own.
    const [elsewhere, ...answers] = await Promise.all([slack.post(joined("CJOIN3", "UOTHER")), ...users.map((user) => slack.post(joined("CJOIN1", user)))]);
    expect([elsewhere, ...answers].map((a) => a.status)).toEqual([200, ...users.map(() => 200)]);

    // Each recorded, and its decision with it, by the time Slack has its answer.
    const rows = await joinsOf("CJOIN1");
    expect(rows.map((r) => r.actor_id).sort()).toEqual(users);
    const head = rows.filter((r) => r.disposition === "bound");
    expect(head).toHaveLength(1);
    const others = rows.filter((r) => r !== head[0]);
    for (const row of others) {
      expect(row).toMatchObject({ disposition: "merged", run_id: head[0].run_id });
      expect(JSON.parse(row.metadata_json)).toMatchObject({ joined_with: head[0].event_id });
    }
    const [{ runs }] = await slack.host.query<{ runs: number }>("SELECT COUNT(*) AS runs FROM run WHERE conversation_id = 'CJOIN1'");
    expect(runs).toBe(1);

    const [ctx] = await waitFor(() => runsIn("CJOIN1").length > 0 && runsIn("CJOIN1"), 20_000, "the welcome run");
    expect(ctx.run_id).toBe(head[0].run_id);
    expect(ctx.actor).toMatchObject({ actor_type: "user", actor_id: head[0].actor_id });
    expect(ctx.event.data.members_count).toBe(MEMBERS);
    // The first join first, then the others as they reached the conversation: each a member as a run's actor is.
    expect(ctx.event.data.members[0]).toEqual({ actor_type: "user", actor_id: head[0].actor_id, actor_name: null, metadata: {} });
    expect(ctx.event.data.members.map((m: { actor_id: string }) => m.actor_id).sort()).toEqual(users);
    await waitFor(() => welcomesIn("CJOIN1").length > 0, 20_000, "the welcome");
    // The welcome's own record names them as its run was told (event.get reads it).
    const [recorded] = await slack.host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_id = ?", [head[0].event_id]);
    expect(JSON.parse(recorded.data_json)).toMatchObject({ members_count: MEMBERS });
    expect(JSON.parse(recorded.data_json).members).toHaveLength(MEMBERS);

    // A join once the welcome has begun is welcomed on its own.
    expect((await slack.post(joined("CJOIN1", "ULATE"))).status).toBe(200);
    const late = await waitFor(() => runsIn("CJOIN1").find((c) => c.actor?.actor_id === "ULATE"), 20_000, "the late join's run");
    expect(late.event.data.members).toBeUndefined();
    await waitFor(() => welcomesIn("CJOIN1").length === 2, 20_000, "the late join's welcome");
    expect(runsIn("CJOIN1")).toHaveLength(2);
    const [other] = await waitFor(() => runsIn("CJOIN3").length > 0 && runsIn("CJOIN3"), 20_000, "the other channel's welcome run");
    expect(other.actor).toMatchObject({ actor_id: "UOTHER" });
    expect(other.event.data.members).toBeUndefined();
    await slack.keepsSecretsOut();
  });

  it("Slack's retry of a join merged into the waiting welcome, or a member joining again meanwhile, counts no one twice", async () => {
    const first = joined("CJOIN4", "UFIRST");
    const second = joined("CJOIN4", "USECOND");
    expect((await slack.post(first)).status).toBe(200);
    // Slack's retry of the second (its answer slow to come back) while the first attempt is still being answered.
    const answers = await Promise.all([slack.post(second), slack.post(second, { headers: { "x-slack-retry-num": "1", "x-slack-retry-reason": "http_timeout" } })]);
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    // The first member leaving and joining again meanwhile: a join of its own, the same member.
    expect((await slack.post(joined("CJOIN4", "UFIRST"))).status).toBe(200);
    const [ctx] = await waitFor(() => runsIn("CJOIN4").length > 0 && runsIn("CJOIN4"), 20_000, "the welcome run");
    expect(ctx.event.data.members.map((m: { actor_id: string }) => m.actor_id)).toEqual(["UFIRST", "USECOND"]);
    expect(ctx.event.data.members_count).toBe(2);
    expect((await joinsOf("CJOIN4")).map((r) => [r.actor_id, r.disposition])).toEqual([
      ["UFIRST", "bound"],
      ["USECOND", "merged"],
      ["UFIRST", "merged"],
    ]);
  });

  it("a join whose record the database refused is answered an error; the welcome's start records it merged, and Slack's retry starts nothing", async () => {
    const head = `slack:${slack.botId}:EvJOINHEAD5`;
    const refused = `slack:${slack.botId}:EvJOINREFUSED5`;
    // The join's own decision is refused, the welcome's start (which names the members on its event first) is not.
    await slack.host.query(
      `CREATE TRIGGER refuse_join_decision BEFORE UPDATE OF disposition ON event_log WHEN NEW.event_id = '${refused}' AND NEW.disposition = 'merged' AND (SELECT data_json FROM event_log WHERE event_id = '${head}') NOT LIKE '%members_count%' BEGIN SELECT RAISE(ABORT, 'refused for the test'); END`,
    );
    expect((await slack.post(slack.callback({ type: "member_joined_channel", user: "UHEAD5", channel: "CJOIN5", channel_type: "C" }, "EvJOINHEAD5"))).status).toBe(200);
    const join = slack.callback({ type: "member_joined_channel", user: "UREFUSED5", channel: "CJOIN5", channel_type: "C" }, "EvJOINREFUSED5");
    expect((await slack.post(join)).status).toBeGreaterThanOrEqual(500);
    const [ctx] = await waitFor(() => runsIn("CJOIN5").length > 0 && runsIn("CJOIN5"), 20_000, "the welcome run");
    expect(ctx.event.data.members.map((m: { actor_id: string }) => m.actor_id)).toEqual(["UHEAD5", "UREFUSED5"]);
    const [row] = await joinsOf("CJOIN5").then((rows) => rows.filter((r) => r.event_id === refused));
    expect(row).toMatchObject({ disposition: "merged", run_id: ctx.run_id });
    expect(JSON.parse(row.metadata_json)).toMatchObject({ joined_with: head });

    expect((await slack.post(join, { headers: { "x-slack-retry-num": "1", "x-slack-retry-reason": "http_error" } })).status).toBe(200);
    await waitFor(() => welcomesIn("CJOIN5").length > 0, 20_000, "the welcome");
    const [{ runs }] = await slack.host.query<{ runs: number }>("SELECT COUNT(*) AS runs FROM run WHERE conversation_id = 'CJOIN5'");
    expect(runs).toBe(1);
    expect(runsIn("CJOIN5")).toHaveLength(1);
    await slack.host.query("DROP TRIGGER refuse_join_decision");
  });

  it("a join whose record the database refused goes with the welcome an operator cancels: recorded merged into it, its own run gone, and Slack's retry welcomes no one", async () => {
    const refused = `slack:${slack.botId}:EvJOINREFUSED6`;
    await slack.host.query(`CREATE TRIGGER refuse_join_decision6 BEFORE UPDATE OF disposition ON event_log WHEN NEW.event_id = '${refused}' BEGIN SELECT RAISE(ABORT, 'refused for the test'); END`);
    expect((await slack.post(joined("CJOIN6", "UHEAD6"))).status).toBe(200);
    const join = slack.callback({ type: "member_joined_channel", user: "UREFUSED6", channel: "CJOIN6", channel_type: "C" }, "EvJOINREFUSED6");
    expect((await slack.post(join)).status).toBeGreaterThanOrEqual(500);
    await slack.host.query("DROP TRIGGER refuse_join_decision6");
    const [head] = (await joinsOf("CJOIN6")).filter((r) => r.actor_id === "UHEAD6");
    expect((await slack.host.admin("POST", `/v1/runs/${head.run_id}/cancel`)).body).toMatchObject({ status: "cancelled" });

    const [row] = (await joinsOf("CJOIN6")).filter((r) => r.event_id === refused);
    expect(row).toMatchObject({ disposition: "merged", run_id: head.run_id });
    expect(JSON.parse(row.metadata_json)).toMatchObject({ joined_with: head.event_id });
    expect((await slack.post(join, { headers: { "x-slack-retry-num": "1", "x-slack-retry-reason": "http_error" } })).status).toBe(200);
    const runs = await slack.host.query<{ run_id: string; status: string }>("SELECT run_id, status FROM run WHERE conversation_id = 'CJOIN6'");
    expect(runs).toEqual([{ run_id: head.run_id, status: "cancelled" }]);
  });
});
