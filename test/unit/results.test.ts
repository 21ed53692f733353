import { describe, expect, it } from "vitest";
import { ResultProcessor } from "../../src/run/results";

const RUN = "run_x";
const make = () =>
  new ResultProcessor({ runId: RUN, runnerId: "http:a/b/c", eventId: "evt_1", conversationKey: "//c1/", conversationId: "c1", stateScopes: { conversation: "scope-key" } });
const line = (type: string, data: unknown, sequence?: number) => JSON.stringify({ run_id: RUN, type, data, sequence });
const msg = (content: string) => ({ message: { role: "assistant", content } });

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

  it("drops duplicate sequences and warns on gaps and reordering, never waiting", () => {
    const p = make();
    const b = p.process([line("message.delta", { chunk: { role: "assistant", content: "a" } }, 1), line("message.delta", { chunk: { role: "assistant", content: "a" } }, 1), line("message.delta", { chunk: { role: "assistant", content: "c" } }, 4), line("message.delta", { chunk: { role: "assistant", content: "b" } }, 2)]);
    const codes = b.ledger.filter((e) => e.type === "host.warning").map((e) => (e.data as { code: string }).code);
    expect(codes).toEqual(["result.duplicate", "result.sequence_gap", "result.reordered"]);
    expect(b.ledger.filter((e) => e.type === "message.delta")).toHaveLength(3);
    expect(p.resultCount).toBe(3);
  });

  it("keeps memory bounded when a sequence number never arrives", () => {
    const p = make();
    const lines = [];
    for (let s = 2; s < 3000; s++) lines.push(line("message.delta", { chunk: { role: "assistant", content: "" } }, s));
    p.process(lines);
    // Internal state: the out-of-order set is capped.
    expect((p as unknown as { above: Set<number> }).above.size).toBeLessThanOrEqual(1024);
  });

  it("drops a state update for a scope the run does not have, with an audit record", () => {
    const b = make().process([line("state.updated", { scope: "actor", key: "k", value: 1 }), line("state.updated", { scope: "conversation", key: "k", value: 2 })]);
    expect(b.stateWrites).toEqual([{ scope: "conversation", scopeKey: "scope-key", key: "k", valueJson: "2" }]);
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
