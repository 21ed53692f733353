import { describe, expect, it } from "vitest";
import { ReplyOrder } from "../../src/delivery/reply-order";

/** A promise with its resolve and reject, to settle a reply when the test says. */
function deferred() {
  let resolve!: () => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

/** Whether `p` has resolved once pending callbacks ran. */
async function isDone(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  await new Promise((r) => setTimeout(r, 0));
  return done;
}

describe("ReplyOrder: a chat's replies in the order their runs ended", () => {
  it("a reply opened with none settling goes at once, with no bound to wait for", async () => {
    const turn = new ReplyOrder().turn();
    expect(turn.bound).toBe(0);
    expect(await isDone(turn.done)).toBe(true);
  });

  it("a reply opened while earlier ones settle waits for all of them, and knows by when at the latest", async () => {
    const order = new ReplyOrder();
    const a = deferred();
    const b = deferred();
    order.settling(a.promise, 5_000);
    order.settling(b.promise, 3_000);
    const turn = order.turn();
    expect(turn.bound).toBe(5_000);
    expect(order.busyUntil()).toBe(5_000);
    a.resolve();
    expect(await isDone(turn.done)).toBe(false);
    expect(order.busyUntil()).toBe(3_000);
    b.resolve();
    expect(await isDone(turn.done)).toBe(true);
    expect(order.busyUntil()).toBe(0);
  });

  it("a reply opened before another started settling (runs that overlapped) does not wait for it", async () => {
    const order = new ReplyOrder();
    const turn = order.turn();
    const later = deferred();
    order.settling(later.promise, 1_000);
    expect(await isDone(turn.done)).toBe(true);
    expect(await isDone(order.turn().done)).toBe(false);
    later.resolve();
  });

  it("a reply whose settling failed holds nobody", async () => {
    const order = new ReplyOrder();
    const failed = deferred();
    order.settling(failed.promise, 1_000);
    failed.reject(new Error("trail write refused"));
    await expect(failed.promise).rejects.toThrow("trail write refused");
    expect(await isDone(order.turn().done)).toBe(true);
    expect(order.busyUntil()).toBe(0);
  });
});
