import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { configOf } from "../../src/env";
import { DeliverySession, type DeliveryDeps } from "../../src/delivery/session";
import { ReplyOrder } from "../../src/delivery/reply-order";
import { grownDraft, splitReply } from "../../src/platforms/split";
import type { RunJob } from "../../src/run/job";
import type { LedgerEntry } from "../../src/stores/runs";

/**
 * A streaming chat reply keeps the draft it shows. Only its first (DELIVERY_MAX_PARTS + 1) × max message size
 * characters can ever be shown (splitReply cuts the rest), and the processor keeps at most STREAMED_TEXT_MAX_CHARS of
 * streamed text "so memory stays bounded": the draft must not hold everything a runner streams (up to
 * RUNNER_MAX_STREAM_BYTES, 32 MiB, per run) in the conversation object's memory.
 */
describe("a streamed chat draft's memory", () => {
  it("holds what can be shown, not every delta the runner streamed", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    // An earlier reply of the chat still on the wire (rate-limited): this one's platform calls wait their turn.
    const order = new ReplyOrder();
    order.settling(new Promise(() => {}), Date.now() + 60_000);
    const deps = { db: {} as never, config: configOf({ ADMIN_TOKEN: "test-admin-token-0123456789abcdef" } as never), artifacts: {} as never, order } satisfies DeliveryDeps;
    const job = {
      runId: "run_big",
      event: { event_type: "message.received" },
      agent: { deliveryPolicy: { streaming: true } },
      delivery: { botId: "bot_1", target: { platform: "telegram", chat_id: "1" } },
    } as unknown as RunJob;
    const session = DeliverySession.open(deps, job)!;
    gc();
    const before = process.memoryUsage();
    // 30 delta lines of about 1 MB of text each: within RUNNER_MAX_LINE_BYTES and RUNNER_MAX_STREAM_BYTES.
    for (let i = 0; i < 30; i++) {
      const text = Buffer.alloc(1_000_000, 97 + (i % 26)).toString("latin1");
      const entry: LedgerEntry = { runId: job.runId, seq: i + 1, type: "message.delta", data: { chunk: { role: "assistant", content: text } }, runnerSequence: i + 1, origin: "runner", createdAt: Date.now() };
      session.feed([entry]);
    }
    gc();
    const after = process.memoryUsage();
    // The strings live on the heap (the Buffers they were made from are freed outside it, later).
    const retained = after.heapUsed - before.heapUsed;
    // Unbounded: about 30 MB. What Telegram can be shown of it (21 × 4096 characters) plus the last line: a few MB at most.
    expect(retained).toBeLessThan(8 * 1024 * 1024);
    expect(session.usable).toBe(true);
  });

  it("shows the same parts as the whole text would, however the deltas come", () => {
    const whole = Array.from({ length: 400 }, (_, i) => (i % 7 === 0 ? "```js\nconst x = 1;\n```\n" : `line ${i} ${"word ".repeat(i % 13)}\n`)).join("");
    for (const [max, parts] of [[100, 3], [64, 2], [4096, 20]] as const) {
      let draft = "";
      for (let i = 0; i < whole.length; i += 37) draft = grownDraft(draft, whole.slice(i, i + 37), max, parts);
      expect(splitReply(draft, max, parts)).toEqual(splitReply(whole, max, parts));
    }
  });
});
