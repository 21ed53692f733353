import { describe, expect, it } from "vitest";
import { Subscriber, type LiveFrame } from "../../src/run/live";

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
