import { beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/fake-platform";
import { useSlackPlatform } from "../support/slack-platform";

/**
 * A Slack join gathers into the welcome run of its agent waiting in its channel (README "Chat platforms"). An agent
 * deleted and created anew under its id is another agent (README "Effective access"): its waiting run fails with
 * `host.agent_unavailable` when it starts. A join bound to the new agent must not join that run, where its member
 * would never be welcomed.
 */
const slack = useSlackPlatform();
const AGENT = "slack-joins-recreated";
const agentBody = () => ({ agent_id: AGENT, name: AGENT, runner_id: slack.runner.runnerId(), event_types: ["group.member_joined"], scope: { type: "bot", id: slack.botId } });

beforeAll(async () => {
  expect((await slack.host.admin("POST", "/v1/admin/agents", agentBody())).status).toBe(201);
});

const joined = (channel: string, user: string) => slack.callback({ type: "member_joined_channel", user, channel, channel_type: "C", inviter: "U42", team: "T1" });
const runsIn = (channel: string) => slack.runner.contexts.filter((c) => c.conversation.conversation_id === channel);

describe("a Slack join for an agent deleted and created anew while the old one's welcome gathers", () => {
  it("starts a welcome of the new agent's own, not joining the old one's, which fails", async () => {
    expect((await slack.post(joined("CRECREATED", "UOLDAGENT"))).status).toBe(200);
    // Within the welcome's wait the operator deletes the agent, leaving its runs, and creates it anew under its id.
    expect((await slack.host.admin("DELETE", `/v1/admin/agents/${AGENT}?runs=leave`)).status).toBe(200);
    expect((await slack.host.admin("POST", "/v1/admin/agents", agentBody())).status).toBe(201);
    expect((await slack.post(joined("CRECREATED", "UNEWAGENT"))).status).toBe(200);

    const rows = await slack.host.query<{ actor_id: string; disposition: string; run_id: string }>(
      "SELECT actor_id, disposition, run_id FROM event_log WHERE conversation_id = 'CRECREATED' AND event_type = 'group.member_joined' ORDER BY seq",
    );
    expect(rows.map((r) => [r.actor_id, r.disposition])).toEqual([
      ["UOLDAGENT", "bound"],
      ["UNEWAGENT", "bound"],
    ]);
    expect((await slack.host.waitForRun(rows[0].run_id)).error?.code).toBe("host.agent_unavailable");
    expect((await slack.host.waitForRun(rows[1].run_id)).status).toBe("completed");
    const [ctx] = await waitFor(() => runsIn("CRECREATED").length > 0 && runsIn("CRECREATED"), 20_000, "the new agent's welcome run");
    expect(ctx.run_id).toBe(rows[1].run_id);
    expect(ctx.actor).toMatchObject({ actor_id: "UNEWAGENT" });
    expect(ctx.event.data.members).toBeUndefined();
    expect(runsIn("CRECREATED")).toHaveLength(1);
  });
});
