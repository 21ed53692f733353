import { describe, expect, it } from "vitest";
import { LiveHub, RECENT_LEDGER_BYTES, Subscriber, type LiveFrame } from "../../src/run/live";
import type { LedgerEntry } from "../../src/stores/runs";

const frame = (seq: number): LiveFrame => ({ seq, type: "t", data: {}, origin: "host" });

async function seqsOf(sub: Subscriber): Promise<number[]> {
  const text = await new Response(sub.readable).text();
  return [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
}

describe("live run subscribers", () => {
  it("deliver each ledger entry once, even when two writers publish out of seq order", async () => {
    const sub = new Subscriber();
    const seqs = seqsOf(sub);
    sub.push(frame(4)); // buffered until the replay is read
    sub.replayed([frame(1), frame(2)]);
    sub.push(frame(2)); // already replayed
    sub.push(frame(5)); // a Host API record published before result 3 is
    sub.push(frame(3));
    sub.push(frame(5));
    sub.end("completed");
    expect(await seqs).toEqual([1, 2, 4, 5, 3]);
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
    const sub = hub.subscribe("r");
    const seqs = seqsOf(sub);
    sub.replayed(hub.remembered("r")!);
    hub.publish("r", [entry(2)]);
    hub.end("r", "completed");
    expect(await seqs).toEqual([1, 2]);
    expect(hub.remembered("r")).toBeNull();
  });
});
