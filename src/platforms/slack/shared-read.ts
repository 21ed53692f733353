/**
 * One read of a thread's parent for the two deliveries of one message: Slack sends a thread reply that mentions the
 * bot both as `message` and as `app_mention`, at once, and both reach the read before either is recorded (the second
 * is refused as the duplicate only then). conversations.replies is allowed once a minute to an app outside Slack's
 * Marketplace, so the second takes the first's read, in flight or just ended (a failed one only in flight). Held in the
 * isolate: two copies handled by different isolates each read.
 */
import { HostError } from "../../lib/errors";

/** How long a read stands for the other copy of its message: they arrive together, handled seconds apart at most. */
const SHARED_FOR_MS = 30_000;
/** Reads held at most: the oldest go first (a burst of thread replies across many channels). */
const MAX_HELD = 500;

interface Held<T> {
  at: number;
  read: Promise<T>;
}

/** A read shared by `key` (the message's own, which both deliveries name): `read` runs only when none is held. */
export function sharedReads<T>() {
  const held = new Map<string, Held<T>>();
  return (key: string, read: () => Promise<T>, timeoutMs: number, now = Date.now()): Promise<T> => {
    // In insertion order: the oldest first, so pruning stops at the first one still standing.
    for (const [k, h] of held) {
      if (now - h.at <= SHARED_FOR_MS && held.size < MAX_HELD) break;
      held.delete(k);
    }
    const earlier = held.get(key);
    // The other copy's read may belong to a request that is cancelled before it settles: this one waits its own time only.
    if (earlier) return withinTime(earlier.read, timeoutMs);
    const started = read();
    const entry = { at: now, read: started };
    held.set(key, entry);
    // A failure is shared only while in flight: once settled, it is not kept for a later delivery (Slack's redelivery of
    // a request that failed after it, whose read may well succeed now).
    started.catch(() => {
      if (held.get(key) === entry) held.delete(key);
    });
    return started;
  };
}

function withinTime<T>(read: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new HostError(400, "attachment_unavailable", "Slack did not give it: no answer in time")), Math.max(0, timeoutMs));
  });
  return Promise.race([read, late]).finally(() => clearTimeout(timer));
}
