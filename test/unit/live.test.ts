import { describe, expect, it } from "vitest";
import { BACKLOG_BYTES, LiveHub, RECENT_LEDGER_BYTES, STALLED_AFTER_KEEPALIVES, Subscriber, type LiveFrame } from "../../src/run/live";
import type { LedgerEntry } from "../../src/stores/runs";

const frame = (seq: number): LiveFrame => ({ seq, type: "t", data: {}, origin: "host" });

async function textOf(sub: Subscriber, reader = sub.readable.getReader()): Promise<string> {
  let text = "";
  const decoder = new TextDecoder();
  for (let r = await reader.read(); !r.done; r = await reader.read()) text += decoder.decode(r.value, { stream: true });
  return text;
}
/** The seqs of the frames a text holds, in order. */
const framesIn = (text: string) => [...text.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1])).filter((d) => typeof d.seq === "number").map((d) => d.seq as number);
const seqsOf = async (sub: Subscriber, reader?: ReadableStreamDefaultReader<Uint8Array>) => framesIn(await textOf(sub, reader));

/** A recorded ledger of `count` frames (seq 1…count), read as the database would be: pages after a seq; `reads` counts the pages. */
function ledger(count: number, data: unknown = {}) {
  const frames = Array.from({ length: count }, (_, i) => ({ ...frame(i + 1), data }));
  const source = Object.assign(
    async (after: number, limit: number) => {
      source.reads++;
      const rest = frames.filter((f) => f.seq > after);
      return { frames: rest.slice(0, limit), hasMore: rest.length > limit };
    },
    { reads: 0 },
  );
  return source;
}

describe("live run subscribers", () => {
  it("deliver each ledger entry once, even when two writers publish out of seq order", async () => {
    const sub = new Subscriber(ledger(2), null);
    sub.push(frame(4)); // waits for the replay
    sub.push(frame(2)); // already in the replay
    sub.push(frame(5)); // a Host API record published before result 3 is
    sub.push(frame(3));
    sub.push(frame(5));
    sub.end("completed");
    const text = await textOf(sub);
    expect(framesIn(text)).toEqual([1, 2, 4, 5, 3]);
    // Each frame's id is the seq up to which every frame has been sent: a resume from it misses none.
    expect([...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]))).toEqual([1, 2, 2, 2, 5]);
  });

  it("resume after the frames the reader has, replayed or live", async () => {
    const sub = new Subscriber(ledger(3), null, { after: 2 });
    sub.push(frame(5));
    sub.push(frame(4));
    sub.end("completed");
    const text = await textOf(sub);
    expect(framesIn(text)).toEqual([3, 5, 4]);
    expect([...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]))).toEqual([3, 3, 5]);
  });

  it("read a long ledger page by page as the reader takes it, and a reader far behind catches up from the database", async () => {
    const kib = { text: "x".repeat(1000) };
    const source = ledger(3000, kib);
    const sub = new Subscriber(source, null);
    const reader = sub.readable.getReader();
    const first = await reader.read();
    // One page read for the first frame (the stream holds at most 64 KiB ahead of its reader), not the whole ledger.
    expect(source.reads).toBe(1);
    // 3000 live frames of 1 KiB published while the reader is away: the follower keeps at most 1 MiB of them.
    for (let seq = 1; seq <= 3000; seq++) {
      sub.push({ ...frame(seq), data: kib });
      expect((sub as unknown as { backlogBytes: number }).backlogBytes).toBeLessThanOrEqual(BACKLOG_BYTES);
    }
    sub.end("completed");
    const seqs = [...framesIn(new TextDecoder().decode(first.value)), ...(await seqsOf(sub, reader))];
    // Every entry once, in order.
    expect(seqs).toEqual(Array.from({ length: 3000 }, (_, i) => i + 1));
  });

  it("end a stream nobody reads any more without waiting for it", async () => {
    const sub = new Subscriber(ledger(1), null);
    await sub.readable.cancel();
    sub.push(frame(2));
    sub.end("completed");
    expect((sub as unknown as { backlog: unknown[] }).backlog).toEqual([]);
  });

  it("forget a follower of a running run as soon as its reader goes away", async () => {
    const hub = new LiveHub();
    hub.track("r");
    const sub = hub.subscribe("r", ledger(0));
    const followers = () => (hub as unknown as { subs: Map<string, Set<Subscriber>> }).subs.get("r")?.size;
    expect(followers()).toBe(1);
    await sub.readable.cancel();
    // Nor is an empty set of followers kept for the run.
    expect(followers()).toBeUndefined();
  });

  it("close a follower by its id when its reader went away without a cancel (it crossed an RPC pipe)", async () => {
    const hub = new LiveHub();
    hub.track("r");
    const gone = hub.subscribe("r", ledger(0));
    const staying = hub.subscribe("r", ledger(0));
    const followers = () => (hub as unknown as { subs: Map<string, Set<Subscriber>> }).subs.get("r")?.size;
    const reader = gone.readable.getReader();
    const waiting = reader.read(); // a pull parked until something is published
    hub.unfollow("r", "not-an-id");
    hub.unfollow("other-run", gone.id);
    expect(followers()).toBe(2);
    hub.unfollow("r", gone.id);
    expect(followers()).toBe(1);
    // Whatever pumps its stream is let go: the stream ends (an error would be workerd's uncaught exception), and nothing more is queued for it.
    expect(await waiting).toEqual({ done: true, value: undefined });
    hub.publish("r", [entry(1)]);
    expect((gone as unknown as { backlog: unknown[] }).backlog).toEqual([]);
    hub.end("r", "completed");
    expect(await seqsOf(staying)).toEqual([1]);
  });

  const KEEPALIVE_MS = 20;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it("drop a follower of a quiet run whose reader stops taking: its keep-alives queue up untaken", async () => {
    const hub = new LiveHub(() => KEEPALIVE_MS);
    hub.track("r");
    const sub = hub.subscribe("r", ledger(0));
    const followers = () => (hub as unknown as { subs: Map<string, Set<Subscriber>> }).subs.get("r")?.size;
    const reader = sub.readable.getReader();
    await reader.read(); // a keep-alive: its reader was there
    const leftAt = Date.now();
    // Nothing is read from now on; nothing is published either, so keep-alives are all that queue. Dropped after about 5
    // intervals; the bound is far past that only so that timers late on a busy machine do not fail it.
    while (followers() !== undefined && Date.now() - leftAt < 100 * KEEPALIVE_MS) await sleep(KEEPALIVE_MS / 2);
    expect(followers()).toBeUndefined();
    expect(Date.now() - leftAt).toBeGreaterThanOrEqual(STALLED_AFTER_KEEPALIVES * KEEPALIVE_MS);
    // What was queued is dropped with it.
    await expect(reader.read()).rejects.toThrow(/took nothing/);
  });

  it("keep a follower whose reader takes part of what is queued, however far behind it falls", async () => {
    const hub = new LiveHub(() => KEEPALIVE_MS);
    hub.track("r");
    const sub = hub.subscribe("r", ledger(0));
    const followers = () => (hub as unknown as { subs: Map<string, Set<Subscriber>> }).subs.get("r")?.size;
    const reader = sub.readable.getReader();
    // One chunk every two intervals: a keep-alive is queued each interval, so the queue only grows.
    for (let i = 0; i < 2 * STALLED_AFTER_KEEPALIVES; i++) {
      await reader.read();
      await sleep(2 * KEEPALIVE_MS);
    }
    expect(followers()).toBe(1);
    hub.end("r", "completed");
    let text = "";
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
    expect(text).toMatch(/^event: end$/m);
  });

  it("end, not error, a follower closed while a page of its catch-up is being read, what it had queued kept", async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let reads = 0;
    // A first page, queued at once; the second read while the reader has taken nothing yet.
    const source = async (after: number) => {
      if (++reads === 1) return { frames: [frame(1), frame(2)], hasMore: true };
      await held;
      return { frames: [frame(after + 1)], hasMore: false };
    };
    const sub = new Subscriber(source, null);
    while (reads < 2) await new Promise((r) => setTimeout(r, 1));
    sub.close();
    release();
    await new Promise((r) => setTimeout(r, 10)); // the page read settles before the reader takes anything
    // An enqueue after the close would have errored the stream, dropping what was queued.
    expect(await seqsOf(sub)).toEqual([1, 2]);
  });
});

const entry = (seq: number, data: unknown = {}): LedgerEntry => ({ runId: "r", seq, type: "t", data, runnerSequence: null, origin: "runner", createdAt: 0 });

describe("a running run's ledger kept in memory", () => {
  it("holds every entry published since the run was tracked, in publish order", () => {
    const hub = new LiveHub();
    hub.publish("r", [entry(1)]); // before tracking: not the whole ledger, so never replayed from memory
    expect(hub.remembered("r")).toBeNull();
    hub.track("r");
    hub.publish("r", [entry(1), entry(2)]);
    hub.publish("r", [entry(4), entry(3)]);
    expect(hub.remembered("r")?.map((f) => f.seq)).toEqual([1, 2, 4, 3]);
  });

  it("gives up past its byte budget, so memory stays bounded and the database is replayed instead", () => {
    const hub = new LiveHub();
    hub.track("r");
    hub.publish("r", [entry(1, { text: "x".repeat(RECENT_LEDGER_BYTES / 2) })]);
    expect(hub.remembered("r")).toHaveLength(1);
    hub.publish("r", [entry(2, { text: "x".repeat(RECENT_LEDGER_BYTES / 2) })]);
    expect(hub.remembered("r")).toBeNull();
    hub.publish("r", [entry(3)]);
    expect(hub.remembered("r")).toBeNull();
  });

  it("forgets the run when it ends", async () => {
    const hub = new LiveHub();
    hub.track("r");
    hub.publish("r", [entry(1)]);
    const source = ledger(0);
    const sub = hub.subscribe("r", source);
    const seqs = seqsOf(sub);
    hub.publish("r", [entry(2)]);
    hub.end("r", "completed");
    expect(await seqs).toEqual([1, 2]);
    // Replayed from memory: the database was never read.
    expect(source.reads).toBe(0);
    expect(hub.remembered("r")).toBeNull();
  });
});

describe("run stream follower", () => {
  it("a follower that falls behind while a catch-up page is being read loses no frame", async () => {
    // The database: what is recorded so far. A read sees what was recorded when it was sent, and answers later.
    const recorded: LiveFrame[] = [frame(1)];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let first = true;
    const source = async (after: number, limit: number) => {
      const rest = recorded.filter((f) => f.seq > after);
      const page = { frames: rest.slice(0, limit), hasMore: rest.length > limit };
      if (first) {
        first = false;
        await gate; // a slow query: live frames are published meanwhile
      }
      return page;
    };
    const sub = new Subscriber(source, null);
    const seqs = seqsOf(sub);
    await new Promise((r) => setTimeout(r, 10)); // the first page's read is in flight
    const kib = { text: "x".repeat(1000) };
    const count = Math.ceil((BACKLOG_BYTES * 1.5) / 1000);
    for (let seq = 2; seq <= count; seq++) {
      const f = ({ ...frame(seq), data: kib });
      recorded.push(f); // recorded first, then published (as the host does)
      sub.push(f);
    }
    release();
    await new Promise((r) => setTimeout(r, 10));
    sub.end("completed");
    const got = await seqs;
    expect(got.length).toBe(count);
    expect(got).toEqual(Array.from({ length: count }, (_, i) => i + 1));
  });

  it("a ledger with a seq that was never recorded (a failed Host API ledger write) still streams to its end", async () => {
    // Seq 3 was taken by a Host API record whose write failed: the ledger has 1, 2, 4, 5, … 1200.
    const recorded = Array.from({ length: 1200 }, (_, i) => frame(i + 1)).filter((f) => f.seq !== 3);
    let reads = 0;
    const source = async (after: number, limit: number) => {
      if (++reads > 50) throw new Error(`the ledger was read ${reads} times (last after seq ${after}) for a 1199-entry ledger`);
      const rest = recorded.filter((f) => f.seq > after);
      return { frames: rest.slice(0, limit), hasMore: rest.length > limit };
    };
    const sub = new Subscriber(source, null);
    sub.end("completed"); // an ended run's stream (LiveHub.follow for a run no longer active)
    const got = await seqsOf(sub);
    expect(got).toEqual(recorded.map((f) => f.seq));
  });
});
