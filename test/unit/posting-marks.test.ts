import { describe, expect, it } from "vitest";
import { PendingReplies } from "../../durable-objects/pending-replies";
import type { ApiResult } from "../../src/platforms/types";
import type { RunJob } from "../../src/run/job";
import { MemStorage } from "../support/mem-storage";

/** What the next instance (a PendingReplies over the same storage) reads of a reply an earlier one was sending. */
const job = (runId: string, platform: "telegram" | "slack" | "lark" | "discord" = "telegram") => ({ runId, delivery: { botId: "bot_1", target: { platform } } }) as unknown as RunJob;
const ok: ApiResult<string> = { ok: true, value: "m1" };
const noAnswer: ApiResult<string> = { ok: false, failure: { kind: "transient", status: null, code: "timeout", message: "timed out", maybeApplied: true } };
const rateLimited: ApiResult<string> = { ok: false, failure: { kind: "rate_limited", status: 429, code: "rate_limited", message: "slow down", retryAfterMs: 1000 } };
const tick = () => new Promise((r) => setTimeout(r, 0));

describe("posting marks (a reply's calls that may show in the chat, for the next instance)", () => {
  it("a send on the wire when the instance died: not sent anew, except where a repeat is harmless (Lark, Discord)", async () => {
    const storage = new MemStorage();
    const before = new PendingReplies(storage as unknown as DurableObjectStorage);
    for (const p of ["telegram", "slack", "lark", "discord"] as const) before.posting(`run_${p}`);
    await tick();
    const next = new PendingReplies(storage as unknown as DurableObjectStorage);
    expect(await next.wouldShowTwice(job("run_telegram", "telegram"))).toBe(true);
    expect(await next.wouldShowTwice(job("run_slack", "slack"))).toBe(true);
    expect(await next.wouldShowTwice(job("run_lark", "lark"))).toBe(false);
    expect(await next.wouldShowTwice(job("run_discord", "discord"))).toBe(false);
  });

  it("a send refused (nothing shown) takes its mark back; one taken, or unanswered, keeps it", async () => {
    const storage = new MemStorage();
    const before = new PendingReplies(storage as unknown as DurableObjectStorage);
    before.posting("run_a");
    before.posted("run_a", rateLimited);
    before.posting("run_b");
    before.posted("run_b", noAnswer);
    before.posting("run_b");
    before.posted("run_b", rateLimited);
    before.posting("run_c");
    before.posted("run_c", ok);
    before.posting("run_c");
    before.posted("run_c", rateLimited);
    await tick();
    const next = new PendingReplies(storage as unknown as DurableObjectStorage);
    expect(await next.wouldShowTwice(job("run_a"))).toBe(false);
    expect(await next.wouldShowTwice(job("run_b"))).toBe(true);
    // Taken: shown whatever the platform (as a delivery trail's `delivery.succeeded` says).
    expect(await next.wouldShowTwice(job("run_c", "lark"))).toBe(true);
  });

  it("a settled reply leaves no mark behind", async () => {
    const storage = new MemStorage();
    const replies = new PendingReplies(storage as unknown as DurableObjectStorage);
    replies.posting("run_a");
    replies.posted("run_a", ok);
    await replies.track(job("run_a"), Promise.resolve());
    expect([...storage.m.keys()]).toEqual([]);
    // A call that outlived its reply's settle window marks nothing anew.
    replies.posted("run_a", ok);
    await tick();
    expect([...storage.m.keys()]).toEqual([]);
  });
});
