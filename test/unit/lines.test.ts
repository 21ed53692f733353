import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { readLines, sseFramer, type Framed } from "../../src/runner/lines";
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

/** Each chunk arrives `gapMs` after the previous one was read. */
function trickleOf(chunks: string[], gapMs: number): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  let i = 0;
  return new ReadableStream({
    async pull(c) {
      if (i > 0) await new Promise((r) => setTimeout(r, gapMs));
      if (i < chunks.length) c.enqueue(enc.encode(chunks[i++]));
      else c.close();
    },
  });
}

const LIMITS = { maxLineBytes: 1024, maxStreamBytes: 1 << 20 };

async function collect(chunks: (string | Uint8Array)[] | ReadableStream<Uint8Array>, limits = LIMITS) {
  const out: string[][] = [];
  for await (const batch of readLines(Array.isArray(chunks) ? streamOf(chunks) : chunks, limits)) out.push(batch);
  return out;
}

describe("readLines", () => {
  it("yields the lines of every chunk that already arrived together, joining lines split across chunks", async () => {
    expect(await collect(['{"a":1}\n{"b"', ':2}\n{"c":3}\n', '{"d":4}'])).toEqual([['{"a":1}', '{"b":2}', '{"c":3}', '{"d":4}']]);
  });

  it("does not wait for chunks still to come: each late chunk is its own batch", async () => {
    expect(await collect(trickleOf(['{"a":1}\n{"b"', ':2}\n{"c":3}\n', '{"d":4}\n'], 20))).toEqual([['{"a":1}'], ['{"b":2}', '{"c":3}'], ['{"d":4}']]);
  });

  it("bounds what it holds: lines already arrived are yielded in slices of about maxLineBytes", async () => {
    const line = "y".repeat(99);
    const batches = await collect(Array.from({ length: 30 }, () => `${line}\n`), { maxLineBytes: 1000, maxStreamBytes: 1 << 20 });
    expect(batches.flat()).toHaveLength(30);
    expect(batches.length).toBeGreaterThanOrEqual(3);
    for (const b of batches) expect(b.join("").length).toBeLessThanOrEqual(1000 + line.length);
  });

  it("bounds a flood of empty lines too: each line counts with its newline", async () => {
    const newlines = new Uint8Array(16 * 1024).fill(10);
    const batches = await collect([newlines, newlines, newlines, newlines], { maxLineBytes: 1024, maxStreamBytes: 1 << 20 });
    expect(batches.flat()).toHaveLength(4 * 16 * 1024);
    // At most the limit's worth plus the chunk being split, never the whole flood at once.
    expect(Math.max(...batches.map((b) => b.length))).toBeLessThanOrEqual(1024 + newlines.length);
  });

  it("keeps a line dripped a byte at a time in one buffer, and joins it whole", async () => {
    const line = "x".repeat(5000);
    let sent = 0;
    const drip = new ReadableStream<Uint8Array>({
      pull: (c) => (sent < line.length ? c.enqueue(new Uint8Array([line.charCodeAt(sent++)])) : (c.enqueue(new Uint8Array([10])), c.close())),
    });
    expect(await collect(drip, { maxLineBytes: 8192, maxStreamBytes: 1 << 20 })).toEqual([[line]]);
  });

  it("holds an unfinished line dripped a byte at a time in memory about its size, not a buffer per chunk", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const size = 256 * 1024;
    let sent = 0;
    let stalled!: () => void;
    const atStall = new Promise<void>((r) => (stalled = r));
    const drip = new ReadableStream<Uint8Array>(
      { pull: (c) => (sent++ < size ? c.enqueue(new Uint8Array([120])) : (stalled(), new Promise<void>(() => {}))) },
      { highWaterMark: 0 },
    );
    gc();
    const before = process.memoryUsage();
    void readLines(drip, { maxLineBytes: 1024 * 1024, maxStreamBytes: 1 << 24 })[Symbol.asyncIterator]().next();
    await atStall;
    gc();
    const after = process.memoryUsage();
    // A buffer per one-byte chunk held over 200 bytes each: about 55 MiB here. One growing buffer: well under a MiB.
    expect(after.heapUsed + after.arrayBuffers - before.heapUsed - before.arrayBuffers).toBeLessThan(8 * 1024 * 1024);
  });

  it("yields the lines that arrived before the stream failed, then the failure", async () => {
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode("last\ndone\n"));
        setTimeout(() => c.error(new Error("connection reset")), 0);
      },
    });
    const lines = readLines(body, LIMITS);
    expect((await lines.next()).value).toEqual(["last", "done"]);
    await expect(lines.next()).rejects.toThrow("connection reset");
  });

  it("lets its consumer stop while a read is still pending", async () => {
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode("first\n"));
      },
    });
    const lines = readLines(body, LIMITS);
    expect((await lines.next()).value).toEqual(["first"]);
    expect(await lines.return(undefined)).toEqual({ done: true, value: undefined });
    // The lock is released: the body can be cancelled by its owner.
    await expect(body.cancel()).resolves.toBeUndefined();
  });

  it("decodes a multi-byte character split between chunks", async () => {
    const bytes = new TextEncoder().encode("héllo\n");
    expect(await collect([bytes.slice(0, 2), bytes.slice(2)])).toEqual([["héllo"]]);
  });

  it("fails a line over the limit even when it never ends", async () => {
    const err = await collect(["x".repeat(600), "x".repeat(600)]).catch((e) => e);
    expect(err).toBeInstanceOf(RunnerCallError);
    expect(err.code).toBe("runner.line_too_large");
    // An inline artifact is the usual cause, and its base64 can outgrow a line below its own 1 MiB cap.
    expect(err.message).toBe("a result line exceeded 1024 bytes (send large artifacts with artifact.upload)");
  });

  it("holds a CRLF line to the limit without its CR, whether the CR ends a chunk or not", async () => {
    const line = "z".repeat(LIMITS.maxLineBytes);
    expect((await collect([`${line}\r\n`, `${line}\r`, "\n"])).flat()).toEqual([`${line}\r`, `${line}\r`]);
    // One byte more is over it, CR or not.
    const err = await collect([`${line}z\r`, "\n"]).catch((e) => e);
    expect(err.code).toBe("runner.line_too_large");
  });

  it("fails a stream over the total limit", async () => {
    const err = await collect(["a\n".repeat(100), "b\n".repeat(100)], { maxLineBytes: 1024, maxStreamBytes: 300 }).catch((e) => e);
    expect(err.code).toBe("runner.stream_too_large");
  });

  it("yields the lines that end within the total limit before failing, even from the chunk that crosses it", async () => {
    const lines: string[] = [];
    const err = await (async () => {
      for await (const batch of readLines(streamOf(["first\nsecond\nthird is cut"]), { maxLineBytes: 1024, maxStreamBytes: 14 })) lines.push(...batch);
    })().catch((e) => e);
    expect(err.code).toBe("runner.stream_too_large");
    expect(lines).toEqual(["first", "second"]);
  });

  it("ends lines at LF only by default, and at CRLF, LF or a lone CR when asked (text/event-stream)", async () => {
    const chunks = ["a\r\nb\rc\nd\r", "\ne\r", "f\n"];
    const read = async (anyLineEnding: boolean) => {
      const out: string[] = [];
      for await (const batch of readLines(streamOf(chunks), LIMITS, { anyLineEnding })) out.push(...batch);
      return out;
    };
    expect(await read(false)).toEqual(["a\r", "b\rc", "d\r", "e\rf"]);
    // The CRLF split across chunks is one line end, not two.
    expect(await read(true)).toEqual(["a", "b", "c", "d", "e", "f"]);
  });
});

describe("sseFramer", () => {
  const payloadsOf = (framed: Framed) => {
    if (framed.error) throw framed.error;
    return framed.payloads;
  };

  it("joins data lines of a frame and ignores comments and other fields", () => {
    const frame = sseFramer({ maxLineBytes: 1024 });
    expect(payloadsOf(frame([": comment", "event: result", 'data: {"a":', "data: 1}", "", 'data: {"b":2}']))).toEqual(['{"a":\n1}']);
    expect(payloadsOf(frame(["", "id: 3"]))).toEqual(['{"b":2}']);
  });

  it("holds a whole frame, not only each of its lines, to the line limit (in UTF-8 bytes)", () => {
    // Two lines of 6 bytes and the joining newline: 13 bytes.
    expect(payloadsOf(sseFramer({ maxLineBytes: 13 })(["data: éèà", "data: ¢¢¢", ""]))).toEqual(["éèà\n¢¢¢"]);
    expect(sseFramer({ maxLineBytes: 12 })(["data: éèà", "data: ¢¢¢", ""]).error).toMatchObject({ code: "runner.line_too_large" });
    // 4-byte characters (surrogate pairs) and 3-byte ones.
    expect(sseFramer({ maxLineBytes: 7 })(["data: 😀", "data: 中", ""]).error).toMatchObject({ code: "runner.line_too_large" });
    expect(payloadsOf(sseFramer({ maxLineBytes: 8 })(["data: 😀", "data: 中", ""]))).toEqual(["😀\n中"]);
    // The count starts again with each frame.
    const frame = sseFramer({ maxLineBytes: 6 });
    expect(payloadsOf(frame(["data: abc", "", "data: def", ""]))).toEqual(["abc", "def"]);
  });

  it("refuses a JSON line outside any data: field in a runner's stream (NDJSON mislabelled), after the frames before it", () => {
    for (const json of ['{"run_id":"r"}', "[1]"]) {
      expect(sseFramer({ maxLineBytes: 1024 })(["data: done", "", json, "data: later", ""])).toEqual({
        payloads: ["done"],
        error: expect.objectContaining({ code: "runner.protocol_error" }),
      });
    }
  });

  it("ignores such a line where the faults given do not refuse it (a model provider's stream), as SSE ignores unknown fields", () => {
    const faults = { notUtf8: () => new Error("utf8"), lineTooLarge: () => new Error("line"), streamTooLarge: () => new Error("stream") };
    expect(payloadsOf(sseFramer({ maxLineBytes: 1024 }, faults)(['{"run_id":"r"}', "data: kept", ""]))).toEqual(["kept"]);
  });

  it("hands over the frames completed before one that is too large, with the error", () => {
    expect(sseFramer({ maxLineBytes: 8 })(["data: done", "", "data: " + "x".repeat(9), ""])).toEqual({
      payloads: ["done"],
      error: expect.objectContaining({ code: "runner.line_too_large" }),
    });
  });
});
