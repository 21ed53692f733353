import { describe, expect, it } from "vitest";
import { markDropped } from "../../src/run/host-end";
import type { LedgerEntry } from "../../src/stores/runs";

/**
 * `dropped` is not stored: a ledger read back (a reply rebuilt after a restart) marks the runner results the host
 * dropped from the host.warning that names each by `ledger_seq`, so it shows what the live reply showed.
 */
const entry = (seq: number, type: string, origin: "runner" | "host", data: unknown = {}): LedgerEntry => ({ runId: "r", seq, type, data, origin, createdAt: 0 });

describe("markDropped", () => {
  it("marks the runner results a host.warning names, and nothing else", () => {
    const entries = [
      entry(1, "message.completed", "runner", { message: { role: "assistant", content: "bad" }, extra: 1 }),
      entry(2, "host.warning", "host", { code: "result.invalid_payload", ledger_seq: 1 }),
      entry(3, "message.completed", "runner", { message: { role: "assistant", content: "good" } }),
      entry(4, "host.warning", "host", { code: "result.sequence_gap", sequence: 9 }),
      entry(5, "x.custom", "runner"),
      entry(6, "host.warning", "host", { code: "result.unknown_type", ledger_seq: 5 }),
    ];
    markDropped(entries);
    expect(entries.filter((e) => e.dropped).map((e) => e.seq)).toEqual([1, 5]);
  });

  it("leaves a valid run.completed whose message alone was dropped: it still ended the run", () => {
    const entries = [
      entry(1, "run.completed", "runner", { finish_reason: "stop", message: { role: "user", content: "not the assistant's" } }),
      entry(2, "host.warning", "host", { code: "result.message_dropped", ledger_seq: 1 }),
      entry(3, "run.completed", "runner", { finish_reason: "stop", not_a_field: true }),
      entry(4, "host.warning", "host", { code: "result.invalid_payload", ledger_seq: 3 }),
    ];
    markDropped(entries);
    expect(entries.filter((e) => e.dropped).map((e) => e.seq)).toEqual([3]);
  });

  it("marks a valid run.completed named past a cap: it ended nothing (the host's run.failed did), as the live run marked it", () => {
    const entries = [
      entry(1, "run.completed", "runner", { finish_reason: "stop", message: { role: "assistant", content: "one message too many" } }),
      entry(2, "host.warning", "host", { code: "result.over_limit", ledger_seq: 1 }),
      entry(3, "run.failed", "host", { code: "runner.too_many_messages" }),
    ];
    markDropped(entries);
    expect(entries.filter((e) => e.dropped).map((e) => e.seq)).toEqual([1]);
  });
});
