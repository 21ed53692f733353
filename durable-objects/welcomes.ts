import { jsonByteLength } from "../src/protocol/common";
import type { ActorContext } from "../src/protocol/context";
import { MEMBERS_LISTED } from "../src/platforms/joined-together";
import { joinedDecision, type RunJob } from "../src/run/job";
import { sameAgent, type EventDecision, type RunTable, type StoredRun } from "./scheduling";

/**
 * Slack sends one `member_joined_channel` event per member: someone adding a 300-person user group to a channel sends
 * 300 within seconds, where Telegram and Lark send one update naming them all (platforms/joined-together.ts). So the
 * welcome run of a Slack join waits JOIN_WAIT_MS, and the joins to its channel arriving meanwhile join it instead of
 * starting runs of their own, as an album's items do (albums.ts): the channel gets one welcome, whose event names them
 * (`data.members`, `data.members_count`), each join still an event of its own, recorded `merged` with
 * `metadata.joined_with` naming the welcome's. A join after the welcome began is welcomed on its own.
 */

/** However many keep coming, a welcome begins at most this long after its first join. */
export const JOIN_HOLD_MS = 30_000;

/** Whether a run's event is a Slack member's join, gathered with the others of its channel. */
export const gathersJoins = (job: RunJob) => job.event.source === "slack" && job.event.event_type === "group.member_joined";

/** A member as `data.members` lists them: as a run's `actor` is (platforms/joined-together.ts). */
const memberOf = (actor: ActorContext | null) => ({ actor_type: actor?.actor_type ?? "unknown", actor_id: actor?.actor_id ?? null, actor_name: actor?.actor_name ?? null, metadata: actor?.metadata ?? {} });

/** A new run whose event is a Slack join waits for the joins that come with it (0: joins are not gathered). */
export function asWelcomeHead(run: StoredRun, waitMs: number, now: number): StoredRun {
  if (!gathersJoins(run.job) || waitMs === 0) return run;
  const waitUntil = Math.max(run.notBefore, now + waitMs);
  const job: RunJob = { ...run.job, joined: { waitUntil, holdUntil: now + JOIN_HOLD_MS, events: [] } };
  return { ...run, job, notBefore: waitUntil, bytes: jsonByteLength(job) };
}

/**
 * The welcome run a join joins: one of its agent (as created: not the run of one deleted and created anew under its id,
 * which fails as it starts) gathering joins, not begun (`joinable`: not executing, not being cancelled) and naming fewer
 * than MEMBERS_LISTED; or the one it already joined (its decision's write went unanswered:
 * it is made again, the member not counted twice).
 */
export function welcomeRunFor(table: RunTable, job: RunJob, joinable: (runId: string) => boolean): readonly [string, StoredRun] | undefined {
  if (!gathersJoins(job)) return undefined;
  const gathering = table.filter(([, r]) => r.job.joined && r.job.agent.agentId === job.agent.agentId);
  return (
    gathering.find(([, r]) => r.job.joined!.events.some((e) => e.eventId === job.event.event_id)) ??
    gathering.find(([, r]) => r.state === "queued" && sameAgent(r.job, job.agent) && joinable(r.job.runId) && r.job.joined!.events.length + 1 < MEMBERS_LISTED)
  );
}

/**
 * The join joins the welcome run, its member listed and counted, which waits JOIN_WAIT_MS more (until its hold at the
 * latest): `store` keeps it (without waking the scheduler: welcome-gathering.ts). Answers the join's decision, whose own run is discarded. As an
 * album's item, the run holds the join before that decision is written.
 */
export function joinWelcome([key, run]: readonly [string, StoredRun], job: RunJob, waitMs: number, now: number, store: (key: string, run: StoredRun) => void): EventDecision {
  const joined = run.job.joined!;
  if (!joined.events.some((e) => e.eventId === job.event.event_id)) {
    const members: ReturnType<typeof memberOf>[] = Array.isArray(run.job.event.data.members) ? run.job.event.data.members : [memberOf(run.job.actor)];
    // A member who joined, left and joined again meanwhile is one member, listed once: their joins are two events.
    const listed = job.actor?.actor_id != null && members.some((m) => m.actor_id === job.actor?.actor_id);
    const named = listed ? members : [...members, memberOf(job.actor)];
    const event = { ...run.job.event, data: { ...run.job.event.data, members: named, members_count: named.length } };
    const waitUntil = Math.max(joined.waitUntil, Math.min(now + waitMs, joined.holdUntil));
    const welcome: RunJob = { ...run.job, event, joined: { ...joined, waitUntil, events: [...joined.events, { eventId: job.event.event_id, runId: job.runId }] } };
    const added = { member: listed ? null : named.at(-1), event: welcome.joined!.events.at(-1) };
    store(key, { ...run, job: welcome, notBefore: Math.max(run.notBefore, waitUntil), bytes: grownBytes(run, welcome, added) });
  }
  return joinedDecision(run.job.event.event_id, run.job.runId);
}

const digits = (n: unknown) => String(n).length;

/**
 * The welcome's size as JSON (what the waiting room counts: scheduling.ts), counted up from the run's by what a join
 * added: recounting the whole at each join would cost a burst of 1,000 joins ~500 times its final size. Exact: each
 * list gains one entry and a comma, `members_count` and `waitUntil` may gain digits. Counted whole at the first join
 * (its `members` list is new) and for a run stored without its size (an earlier release).
 */
function grownBytes(run: StoredRun, welcome: RunJob, added: { member: unknown; event: unknown }): number {
  const [before, after] = [run.job, welcome];
  if (run.bytes === undefined || !Array.isArray(before.event.data.members)) return jsonByteLength(after);
  const listItem = (entry: unknown, hadAny: boolean) => (entry === null ? 0 : jsonByteLength(entry) + (hadAny ? 1 : 0));
  return (
    run.bytes +
    listItem(added.member, (before.event.data.members as unknown[]).length > 0) +
    listItem(added.event, before.joined!.events.length > 0) +
    digits(after.event.data.members_count) - digits(before.event.data.members_count) +
    digits(after.joined!.waitUntil) - digits(before.joined!.waitUntil)
  );
}
