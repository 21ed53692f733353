import { jsonByteLength } from "../src/protocol/common";
import type { SteeringInputItem } from "../src/protocol/host-api-results";
import type { RunJob } from "../src/run/job";
import { claimRefOf, steeringItemOf, type ClaimRef } from "../src/run/steering";

/**
 * How a steering queue is kept in the Durable Object's storage (steering-queue.ts). A queue key holds the claim and
 * its message's size; the message itself (up to MAX_EVENT_BODY_BYTES, and a queue holds 100) is kept apart under
 * `BODY`, read only when pulled or decided anew: counting a queue, choosing what a pull answers and recording drops
 * never bring every message into the isolate's memory.
 */
export interface ClaimStub extends ClaimRef {
  bytes: number;
  /** The version of the newest edit of its message applied while it waited (`amend`). */
  revision?: number;
  /** Its body is the claimed event's whole job (the item made from it as pulled), so a drop can have it decided anew; absent in claims stored by earlier releases, whose body is the item. */
  job?: true;
  /** The claimed event's own run (its job's): which run a dropped claim's decision belongs to, known without its body. Absent in claims stored by earlier releases. */
  own_run_id?: string;
}
/** A queue value: a stub, or (written by an earlier version) the whole item. */
export type Queued = ClaimStub | SteeringInputItem;
export const isWhole = (v: Queued): v is SteeringInputItem => "event" in v;
export const stubOf = (v: Queued): ClaimStub => (isWhole(v) ? { ...claimRefOf(v), bytes: jsonByteLength(v) } : v);
/** What a body key holds: the claimed event's job, or (earlier releases) its item. */
export type Body = RunJob | SteeringInputItem;

/** The claim's queue value and body: the job whole, its stub sized as the item the pull answers. */
export function stored(job: RunJob, item: SteeringInputItem, revision?: number): { stub: ClaimStub; body: RunJob } {
  return { stub: { ...claimRefOf(item), bytes: jsonByteLength(item), ...(revision === undefined ? {} : { revision }), job: true, own_run_id: job.runId }, body: job };
}

/** The item a pull answers for a stored claim. */
export function itemOfBody(stub: ClaimStub, body: Body): SteeringInputItem {
  if (!stub.job) return body as SteeringInputItem;
  return steeringItemOf(body as RunJob, { runId: stub.claimed_run_id, runner: { runnerId: stub.runner_id } }, Date.parse(stub.claimed_at));
}

/** The oldest claims whose messages' JSON (UTF-8) fits `maxBytes` together, the first always (unless `firstAlways` is false: a pull's later round). */
export function withinBytes(items: [string, Queued][], maxBytes: number, firstAlways = true): [string, Queued][] {
  if (maxBytes === Infinity) return items;
  let size = 0;
  for (let i = 0; i < items.length; i++) {
    size += stubOf(items[i][1]).bytes;
    if (size > maxBytes && (i > 0 || !firstAlways)) return items.slice(0, i);
  }
  return items;
}

/** Storage calls take at most 128 keys; chunks issued in one tick still make one atomic write. */
const MAX_KEYS = 128;
export const chunks = <T>(xs: T[]): T[][] => Array.from({ length: Math.ceil(xs.length / MAX_KEYS) }, (_, i) => xs.slice(i * MAX_KEYS, (i + 1) * MAX_KEYS));

export const QUEUE = "steer:";
export const prefixOf = (runId: string) => `${QUEUE}${runId}:`;
/** The messages of queued claims, under their queue key's suffix. */
const BODY = "steer-item:";
export const bodyKeyOf = (queueKey: string) => `${BODY}${queueKey.slice(QUEUE.length)}`;

export const deleteAll = (storage: DurableObjectStorage, keys: string[]): Promise<unknown> => Promise.all(chunks(keys).map((part) => storage.delete(part)));
export const putAll = (storage: DurableObjectStorage, entries: [string, unknown][]): Promise<unknown> => Promise.all(chunks(entries).map((part) => storage.put(Object.fromEntries(part))));

/** The messages of these queue entries, in their order (an entry stored whole is its own message). */
export async function messagesOf(storage: DurableObjectStorage, entries: [string, Queued][]): Promise<SteeringInputItem[]> {
  const keys = entries.filter(([, v]) => !isWhole(v)).map(([k]) => bodyKeyOf(k));
  const bodies = new Map<string, Body>();
  for (const part of chunks(keys)) for (const [k, v] of await storage.get<Body>(part)) bodies.set(k, v);
  return entries.flatMap(([k, v]) => {
    if (isWhole(v)) return [v];
    const body = bodies.get(bodyKeyOf(k));
    return body ? [itemOfBody(v, body)] : [];
  });
}
