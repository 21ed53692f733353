import { describe, expect, it } from "vitest";
import { readLines, sseFramer } from "../../src/runner/lines";
import { RunnerCallError } from "../../src/runner/errors";

function streamOf(chunks: (string | Uint8Array)[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const ch of chunks) c.enqueue(typeof ch === "string" ? enc.encode(ch) : ch);
      c.close();
    },
  });
}

async function collect(chunks: (string | Uint8Array)[], limits = { maxLineBytes: 1024, maxStreamBytes: 1 << 20 }) {
  const out: string[][] = [];
  for await (const batch of readLines(streamOf(chunks), limits)) out.push(batch);
  return out;
}

describe("readLines", () => {
  it("yields the complete lines of each chunk together, joining lines split across chunks", async () => {
    expect(await collect(['{"a":1}\n{"b"', ':2}\n{"c":3}\n', '{"d":4}'])).toEqual([['{"a":1}'], ['{"b":2}', '{"c":3}'], ['{"d":4}']]);
  });

  it("decodes a multi-byte character split between chunks", async () => {
    const bytes = new TextEncoder().encode("héllo\n");
    expect(await collect([bytes.slice(0, 2), bytes.slice(2)])).toEqual([["héllo"]]);
  });

  it("fails a line over the limit even when it never ends", async () => {
    const err = await collect(["x".repeat(600), "x".repeat(600)]).catch((e) => e);
    expect(err).toBeInstanceOf(RunnerCallError);
    expect(err.code).toBe("runner.line_too_large");
  });

  it("fails a stream over the total limit", async () => {
    const err = await collect(["a\n".repeat(100), "b\n".repeat(100)], { maxLineBytes: 1024, maxStreamBytes: 300 }).catch((e) => e);
    expect(err.code).toBe("runner.stream_too_large");
  });
});

describe("sseFramer", () => {
  it("joins data lines of a frame and ignores comments and other fields", () => {
    const frame = sseFramer();
    expect(frame([": comment", "event: result", 'data: {"a":', "data: 1}", "", 'data: {"b":2}'])).toEqual(['{"a":\n1}']);
    expect(frame(["", "id: 3"])).toEqual(['{"b":2}']);
  });
});
