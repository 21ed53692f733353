import { describe, expect, it } from "vitest";
import { asWelcomeHead, JOIN_HOLD_MS, joinWelcome, welcomeRunFor } from "../../durable-objects/welcomes";
import { waitingRun, type StoredRun } from "../../durable-objects/scheduling";
import type { RunJob } from "../../src/run/job";

/** A member's join: only what gathering reads is meaningful. */
function joinJob(runId: string, user: string, opts: { source?: string; agentId?: string } = {}): RunJob {
  const event = { event_id: `evt-${runId}`, event_type: "group.member_joined", source: opts.source ?? "slack", data: { inviter: "U42" } };
  // A partial job: gathering reads its event, actor and agent id, and waitingRun its debounce.
  return { runId, event, actor: { actor_type: "user", actor_id: user, actor_name: null, metadata: {} }, agent: { agentId: opts.agentId ?? "agent", concurrency: {} }, runner: { capabilities: {} } } as unknown as RunJob;
}

const head = (job: RunJob, waitMs: number, now: number): [string, StoredRun] => [`run:${job.runId}`, asWelcomeHead(waitingRun(job, "enqueue", now), waitMs, now)];
const joinable = () => true;

describe("Slack joins gathered into one welcome", () => {
  it("a Slack join's run waits JOIN_WAIT_MS; 0, or another platform's join, starts at once as before", () => {
    expect(head(joinJob("a", "U1"), 2_000, 10)[1]).toMatchObject({ notBefore: 2_010, job: { joined: { waitUntil: 2_010, holdUntil: 10 + JOIN_HOLD_MS, events: [] } } });
    for (const [job, waitMs] of [[joinJob("a", "U1"), 0], [joinJob("a", "U1", { source: "telegram" }), 2_000]] as const) {
      const [, run] = head(job, waitMs, 10);
      expect([run.notBefore, run.job.joined]).toEqual([10, undefined]);
    }
  });

  it("each join pushes the start back, never past the hold; another agent's join is not gathered", () => {
    let entry: readonly [string, StoredRun] = head(joinJob("a", "U1"), 2_000, 0);
    const store = (key: string, run: StoredRun) => (entry = [key, run]);
    const at = [1_000, 2_500, JOIN_HOLD_MS - 500];
    at.forEach((now, i) => {
      const job = joinJob(`j${i}`, `U${i + 2}`);
      expect(joinWelcome(welcomeRunFor([entry], job, joinable)!, job, 2_000, now, store)).toEqual({ disposition: "merged", runId: "a", metadata: { joined_with: "evt-a" } });
    });
    expect(entry[1].notBefore).toBe(JOIN_HOLD_MS);
    expect(entry[1].job.event.data).toMatchObject({ members_count: 4, members: ["U1", "U2", "U3", "U4"].map((id) => ({ actor_type: "user", actor_id: id, actor_name: null, metadata: {} })) });
    expect(welcomeRunFor([entry], joinJob("x", "U9", { agentId: "other" }), joinable)).toBeUndefined();
    // Begun (or being cancelled), it takes no more.
    expect(welcomeRunFor([entry], joinJob("y", "U9"), () => false)).toBeUndefined();
  });
});
