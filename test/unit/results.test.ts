import { describe, expect, it } from "vitest";
import { ResultProcessor } from "../../src/run/results";
import { holdsUnsafeNumber } from "../../src/lib/exact-json";
import { MAX_SEQUENCE_GAPS } from "../../src/run/sequence-check";
import { SequenceSet } from "../../src/run/sequence-set";

const RUN = "run_x";
const make = () =>
  new ResultProcessor({ runId: RUN, runnerId: "http:a/b/c", eventId: "evt_1", place: { conversationKey: "//c1/", conversationId: "c1" }, stateScopes: { conversation: "scope-key" } });
const line = (type: string, data: unknown, sequence?: number) => JSON.stringify({ run_id: RUN, type, data, sequence });
const gapDelta = (s: number) => JSON.stringify({ run_id: RUN, type: "message.delta", data: { chunk: { role: "assistant", content: "" } }, sequence: s });
const msg = (content: string) => ({ message: { role: "assistant", content } });
/** The runner's results a batch records (a duplicate is not one): what a run's `result_count` counts once written. */
const fromRunner = (b: ReturnType<ResultProcessor["process"]>) => b.ledger.filter((e) => e.origin === "runner").length;

describe("ResultProcessor", () => {
  it("turns a message into a transcript item with the artifact refs that preceded it", () => {
    const p = make();
    const b = p.process([
      line("artifact.created", { artifact_type: "image", mime_type: "image/png", content_base64: btoa("png") }, 1),
      line("message.completed", msg("see image"), 2),
      line("run.completed", { finish_reason: "stop" }, 3),
    ]);
    expect(b.terminal).toBe(true);
    expect(b.inlineArtifacts).toHaveLength(1);
    expect(b.transcriptItems).toHaveLength(1);
    expect(b.transcriptItems[0].artifactRefs).toEqual([b.inlineArtifacts[0].ref]);
    expect(p.finish().outcome).toMatchObject({ status: "completed", finishReason: "stop", finalMessage: msg("see image").message });
  });

  it("fails a stream whose terminal result was dropped as invalid by saying so, not that none came", () => {
    const p = make();
    p.process([line("message.completed", msg("hi"), 1), line("run.completed", { finish_reason: "stop", message: { role: "assistant", content: [{ type: "hologram" }] } }, 2)]);
    const { outcome } = p.finish();
    expect(outcome).toMatchObject({ status: "failed", errorCode: "runner.stream_closed" });
    expect(outcome.errorMessage).toMatch(/^the result stream ended without a valid run\.completed or run\.failed \(dropped, run\.completed: /);
    const plain = make();
    plain.process([line("message.completed", msg("hi"), 1)]);
    expect(plain.finish().outcome.errorMessage).toBe("the result stream ended without run.completed or run.failed");
  });

  it("drops duplicate sequences and warns on gaps and reordering, never waiting", () => {
    const p = make();
    const b = p.process([line("message.delta", { chunk: { role: "assistant", content: "a" } }, 1), line("message.delta", { chunk: { role: "assistant", content: "a" } }, 1), line("message.delta", { chunk: { role: "assistant", content: "c" } }, 4), line("message.delta", { chunk: { role: "assistant", content: "b" } }, 2)]);
    const codes = b.ledger.filter((e) => e.type === "host.warning").map((e) => (e.data as { code: string }).code);
    expect(codes).toEqual(["result.duplicate", "result.sequence_gap", "result.reordered"]);
    expect(b.ledger.filter((e) => e.type === "message.delta")).toHaveLength(3);
    expect(fromRunner(b)).toBe(3);
  });

  it("applies a late number however late and drops a duplicate however old", () => {
    const delta = (s: number) => line("message.delta", { chunk: { role: "assistant", content: "" } }, s);
    const p = make();
    // 2 is held back while thousands of others go out: it is still new when it comes; 1 is still known.
    const b = p.process([delta(1), ...Array.from({ length: 3000 }, (_, i) => delta(i + 3)), delta(2), delta(1), delta(1500)]);
    const codes = b.ledger.filter((e) => e.type === "host.warning").map((e) => (e.data as { code: string }).code);
    expect(codes).toEqual(["result.sequence_gap", "result.reordered", "result.duplicate", "result.duplicate"]);
    expect(fromRunner(b)).toBe(3002);
  });

  it("closes the lowest gaps once more than MAX_SEQUENCE_GAPS are open, warning once, and goes on", () => {
    const warnings = (b: ReturnType<ResultProcessor["process"]>) => b.ledger.filter((e) => e.type === "host.warning").map((e) => (e.data as { code: string }).code);
    // Sequences start at 1 (PROTOCOL §7). 2, 4, 6, …: each number leaves the one below it open.
    const p = make();
    // 4096 gaps open (1, 3, …, 8191): nothing closed yet.
    const first = p.process(Array.from({ length: MAX_SEQUENCE_GAPS }, (_, i) => gapDelta(2 * (i + 1))));
    expect(first.error).toBeUndefined();
    expect(warnings(first)).not.toContain("result.gaps_closed");
    // Past the bound, twice: the run goes on, told once; the gaps closed first (1, then 3) take no late number, a later gap still does.
    const next = p.process([gapDelta(2 * (MAX_SEQUENCE_GAPS + 1)), gapDelta(2 * (MAX_SEQUENCE_GAPS + 2)), gapDelta(1), gapDelta(3), gapDelta(5), line("run.completed", { finish_reason: "stop" }, 2 * (MAX_SEQUENCE_GAPS + 3))]);
    expect(next.error).toBeUndefined();
    expect(warnings(next).filter((c) => c !== "result.sequence_gap")).toEqual(["result.gaps_closed", "result.duplicate", "result.duplicate", "result.reordered"]);
    expect(next.terminal).toBe(true);
    expect(fromRunner(first) + fromRunner(next)).toBe(MAX_SEQUENCE_GAPS + 4);
  });

  it("drops a state update for a scope the run does not have, with an audit record", () => {
    const b = make().process([line("state.updated", { scope: "actor", key: "k", value: 1 }), line("state.updated", { scope: "conversation", key: "k", value: 2 })]);
    expect(b.stateWrites).toEqual([{ scope: "conversation", scopeKey: "scope-key", key: "k", valueJson: "2", recorded: expect.objectContaining({ type: "state.updated", data: { scope: "conversation", key: "k", value: 2 } }) }]);
    expect(b.audits[0].data).toMatchObject({ result_type: "state.updated" });
  });

  it("writes what came before a protocol violation, then reports it", () => {
    const b = make().process([line("message.delta", { chunk: { role: "assistant", content: "x" } }), "not json", line("message.completed", msg("never"))]);
    expect(b.ledger).toHaveLength(1);
    expect(b.error?.code).toBe("runner.protocol_error");
    expect(b.transcriptItems).toHaveLength(0);
  });

  it("closes a run with no terminal result or no message with a clear code", () => {
    expect(make().finish().outcome.errorCode).toBe("runner.stream_closed");
    const p = make();
    p.process([line("run.completed", { finish_reason: "stop" })]);
    expect(p.finish().outcome).toMatchObject({ status: "failed", errorCode: "runner.no_output" });
    const q = make();
    q.process([line("run.failed", { code: "model.down", error: "provider unavailable", retryable: true })]);
    expect(q.finish().outcome).toMatchObject({ status: "failed", errorCode: "model.down" });
  });
});

describe("SequenceSet", () => {
  it("agrees with a plain set for numbers added in any order, refuses a range past its bound, and closes its lowest gap on request", () => {
    let seed = 7;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const set = new SequenceSet(10_000);
    const plain = new Set<number>();
    for (let i = 0; i < 3000; i++) {
      const n = 1 + Math.floor(random() * 2000);
      expect(set.has(n)).toBe(plain.has(n));
      if (!plain.has(n)) {
        expect(set.add(n)).toBe(true);
        plain.add(n);
      }
    }
    for (let n = 0; n <= 2001; n++) expect(set.has(n)).toBe(plain.has(n));

    const small = new SequenceSet(2);
    expect([small.add(1), small.add(3), small.add(2), small.add(5), small.add(7)]).toEqual([true, true, true, true, false]);
    expect([small.has(4), small.has(7), small.has(6)]).toEqual([false, false, false]);
    // Filling a gap never needs a new range.
    expect(small.add(4)).toBe(true);

    const gappy = new SequenceSet(4);
    for (const n of [3, 6, 9]) gappy.add(n);
    expect(gappy.gaps()).toBe(3);
    expect([gappy.closeLowestGap(), gappy.has(1), gappy.has(2), gappy.has(4)]).toEqual([[1, 2], true, true, false]);
    expect([gappy.closeLowestGap(), gappy.has(5), gappy.has(7), gappy.gaps()]).toEqual([[4, 5], true, false, 1]);
    expect([gappy.closeLowestGap(), gappy.closeLowestGap(), gappy.gaps()]).toEqual([[7, 8], null, 0]);
  });
});

describe("holdsUnsafeNumber (whether a result's ledger data needs its text parsed again, keeping digits)", () => {
  it("finds a number past 2^53 anywhere in the value, and nothing in digits inside strings", () => {
    expect(holdsUnsafeNumber({ a: [1, { b: 2 ** 60 }] })).toBe(true);
    expect(holdsUnsafeNumber([-(2 ** 53)])).toBe(true);
    expect(holdsUnsafeNumber({ phone: "+4412345678901234567", hash: "0123456789012345678901234567890123456789", n: 2 ** 53 - 1 })).toBe(false);
    expect(holdsUnsafeNumber({ x: null, y: true, z: 1.5 })).toBe(false);
    // Deep values are walked without recursion.
    let deep: unknown = 2 ** 70;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(holdsUnsafeNumber(deep)).toBe(true);
  });
});
