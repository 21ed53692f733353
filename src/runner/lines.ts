import { RunnerCallError } from "./errors";

export interface LineLimits {
  maxLineBytes: number;
  maxStreamBytes: number;
}

/** The errors a stream's reader throws, in the words of whose stream it is: a runner's result stream unless told. */
export interface LineFaults {
  notUtf8(cause: unknown): Error;
  lineTooLarge(maxLineBytes: number): Error;
  streamTooLarge(maxStreamBytes: number): Error;
  /**
   * A JSON line where an SSE field belongs (NDJSON under a text/event-stream label). Without it such a line is
   * ignored, as SSE ignores fields it does not know.
   */
  jsonOutsideData?(): Error;
}

const RESULT_LINE_FAULTS: LineFaults = {
  notUtf8: (cause) => new RunnerCallError("runner.protocol_error", "a result line is not valid UTF-8", { cause }),
  // The usual culprit: an inline artifact, whose base64 outgrows the line before its decoded bytes reach their own cap.
  lineTooLarge: (max) => new RunnerCallError("runner.line_too_large", `a result line exceeded ${max} bytes (send large artifacts with artifact.upload)`),
  streamTooLarge: (max) => new RunnerCallError("runner.stream_too_large", `result stream exceeded ${max} bytes`),
  // Were it ignored, so would every result be: the run would fail as a stream that ended (or hung to its deadline) without
  // the terminal result its runner did send.
  jsonOutsideData: () =>
    new RunnerCallError(
      "runner.protocol_error",
      "a text/event-stream answer holds a JSON line outside any data: field: send each result as `data: {...}` and a blank line, or answer Content-Type application/x-ndjson",
    ),
};

const LF = 10;
const CR = 13;
/**
 * Bytes read between two turns of the event loop at most. A body already buffered is read with no I/O to wait for,
 * and lines that carry nothing to apply (blank lines, SSE comments) give the consumer none either: the turns keep
 * a flood of them from holding off the run's deadline, a cancel and the object's other requests until the stream limit.
 */
const TURN_EVERY_BYTES = 256 * 1024;

/**
 * What an SSE line holds beyond its frame's data: `data: `. The limit is the result's (sseFramer holds the frame's
 * data to it), so a line may carry its field name too: a result an NDJSON line may send fits an SSE frame as well.
 */
export const SSE_FIELD_BYTES = "data: ".length;

/** A turn of the event loop: timers due (a deadline) and requests waiting run first. */
const nextTurn = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/** `read`'s result, or null if it has not settled by the event loop's next turn. */
async function unlessLater<T>(read: Promise<T>): Promise<T | null> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const nextTurn = new Promise<null>((resolve) => (timer = setTimeout(resolve, 0, null)));
  try {
    return await Promise.race([read, nextTurn]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Splits a byte stream into lines incrementally. Each yield holds the
 * complete lines of the chunks read so far that were ready without waiting
 * (so callers apply them as one batch: a runner's last message and its
 * `run.completed` sent back to back usually cost one write, not two). It
 * never waits for more to batch, holds at most about `maxLineBytes` of lines
 * (each counted with its newline) plus one chunk, and one partial line in a
 * buffer of at most twice `maxLineBytes`. Lines that arrived before the
 * stream failed, or that ended within `maxStreamBytes`, are yielded before
 * the failure is thrown. Lines end at LF (a CR before it counts as the end,
 * not against the limit), or with `anyLineEnding` (for text/event-stream) at
 * CRLF, LF or CR. A line may hold `fieldBytes` more
 * than `maxLineBytes` (SSE_FIELD_BYTES: its field name), the limit still
 * named as `maxLineBytes`. The event loop gets a turn at least every
 * TURN_EVERY_BYTES read. Text after the last line end is a last line,
 * unless `dropUnended`: a stream read where a line cut short means the body
 * was cut (a model's SSE, in which an unfinished event is discarded anyway).
 */
export async function* readLines(
  body: ReadableStream<Uint8Array>,
  limits: LineLimits,
  opts: { anyLineEnding?: boolean; dropUnended?: boolean; fieldBytes?: number; faults?: LineFaults } = {},
): AsyncGenerator<string[]> {
  const faults = opts.faults ?? RESULT_LINE_FAULTS;
  const lineTooLarge = () => faults.lineTooLarge(limits.maxLineBytes);
  const maxLine = limits.maxLineBytes + (opts.fieldBytes ?? 0);
  // Fatal: bytes that are not UTF-8 make the line no JSON text at all, refused rather than read with U+FFFD in their place.
  const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
  const decode = (bytes: Uint8Array) => {
    try {
      return decoder.decode(bytes);
    } catch (cause) {
      throw faults.notUtf8(cause);
    }
  };
  const reader = body.getReader();
  const partial = new PartialLine();
  const ends = new LineEnds(opts.anyLineEnding ?? false);
  // Where lines end at LF only, a CR before it is the line's end (CRLF), not its content: a line at the limit fits either way.
  const crlfRoom = opts.anyLineEnding ? 0 : 1;
  const tooLong = (length: number, last: number | undefined) => length > maxLine + (last === CR ? crlfRoom : 0);
  let total = 0;
  let lines: string[] = [];
  /** Bytes of the lines in hand, each counted with its newline, so a flood of empty lines is bounded too. */
  let linesBytes = 0;
  const split = (chunk: Uint8Array) => {
    // The lines that end within the limit are kept (they may hold the terminal result); the one crossing it is not.
    const room = limits.maxStreamBytes - total;
    total += chunk.length;
    const value = chunk.length > room ? chunk.subarray(0, room) : chunk;
    let start = ends.skipFirst(value);
    for (let i = ends.next(value, start); i !== -1; i = ends.next(value, start)) {
      if (tooLong(partial.length + (i - start), i > start ? value[i - 1] : partial.last)) throw lineTooLarge();
      linesBytes += partial.length + (i - start) + 1;
      // An empty line (a flood of them costs a decode each otherwise) is the empty string.
      lines.push(partial.length + (i - start) === 0 ? "" : decode(partial.take(value.subarray(start, i))));
      start = ends.after(value, i);
    }
    if (value !== chunk) throw faults.streamTooLarge(limits.maxStreamBytes);
    if (start < value.length) {
      if (tooLong(partial.length + (value.length - start), value[value.length - 1])) throw lineTooLarge();
      partial.append(value.subarray(start));
    }
  };
  const handOver = () => {
    const batch = lines;
    lines = [];
    linesBytes = 0;
    return batch;
  };
  /** A read started while lines were in hand that had not settled by the next turn: the next batch begins with it. */
  let ahead: Promise<ReadableStreamReadResult<Uint8Array>> | undefined;
  /** Bytes read since the event loop last had a turn (a read that was not ready by the next turn resets it). */
  let sinceTurn = 0;
  try {
    for (;;) {
      try {
        if (sinceTurn >= TURN_EVERY_BYTES) {
          sinceTurn = 0;
          await nextTurn();
        }
        const read = ahead ?? reader.read();
        ahead = undefined;
        const result = lines.length ? await unlessLater(read) : await read;
        if (result === null) {
          sinceTurn = 0;
          ahead = read;
          yield handOver();
          continue;
        }
        if (result.done) {
          // Decoded where a failure is caught: a last line that is not UTF-8 fails the stream after the lines before it.
          if (partial.length > 0 && !opts.dropUnended) lines.push(decode(partial.take(new Uint8Array())));
          break;
        }
        sinceTurn += result.value.length;
        split(result.value);
      } catch (err) {
        // What arrived intact is applied before the failure: it may hold the run's terminal result.
        if (lines.length) yield handOver();
        throw err;
      }
      // Bounded memory: a runner that floods gets its lines applied in slices.
      if (linesBytes >= limits.maxLineBytes) yield handOver();
    }
    if (lines.length) yield handOver();
  } finally {
    if (ahead) {
      // The consumer left with a read outstanding, and workerd refuses to release a lock then: cancel the body and let that read settle.
      await reader.cancel().catch(() => {});
      await ahead.catch(() => {});
    }
    reader.releaseLock();
  }
}

/**
 * Where lines end: at LF (NDJSON), or with `any` at CRLF, LF or a lone CR, as
 * text/event-stream allows. A CR that ends a chunk may be the first half of
 * a CRLF: an LF starting the next chunk is then skipped.
 */
class LineEnds {
  private crEndedChunk = false;
  /** Positions found ahead of the scan (Infinity: none left in the chunk), so each byte is searched once per kind. */
  private lf = -1;
  private cr = -1;

  constructor(private readonly any: boolean) {}

  /** Where the chunk's first line starts. */
  skipFirst(value: Uint8Array): number {
    this.lf = this.cr = -1;
    const skip = this.crEndedChunk && value[0] === LF ? 1 : 0;
    if (value.length) this.crEndedChunk = false;
    return skip;
  }

  /** The next line end at or after `from`, or -1. */
  next(value: Uint8Array, from: number): number {
    if (this.lf < from) this.lf = found(value.indexOf(LF, from));
    if (!this.any) return this.lf === Infinity ? -1 : this.lf;
    if (this.cr < from) this.cr = found(value.indexOf(CR, from));
    const end = Math.min(this.lf, this.cr);
    return end === Infinity ? -1 : end;
  }

  /** Where the line after the end at `i` starts. */
  after(value: Uint8Array, i: number): number {
    if (value[i] !== CR) return i + 1;
    if (i + 1 === value.length) this.crEndedChunk = true;
    return value[i + 1] === LF ? i + 2 : i + 1;
  }
}

const found = (index: number) => (index === -1 ? Infinity : index);

/**
 * The unfinished line, in one buffer that grows by doubling: a line dripped a
 * byte per chunk costs at most twice its size, not a buffer per chunk.
 */
class PartialLine {
  private buffer = new Uint8Array(0);
  length = 0;

  /** Its last byte, if any. */
  get last(): number | undefined {
    return this.length ? this.buffer[this.length - 1] : undefined;
  }

  append(bytes: Uint8Array): void {
    const needed = this.length + bytes.length;
    if (needed > this.buffer.length) {
      const grown = new Uint8Array(Math.max(needed, this.buffer.length * 2, 1024));
      grown.set(this.buffer.subarray(0, this.length));
      this.buffer = grown;
    }
    // Copied: the reader may reuse its chunk's memory.
    this.buffer.set(bytes, this.length);
    this.length = needed;
  }

  /** The whole line, ending with `tail`; the buffer is released, as most lines arrive whole. */
  take(tail: Uint8Array): Uint8Array {
    if (this.length === 0) return tail;
    this.append(tail);
    const line = this.buffer.subarray(0, this.length);
    this.buffer = new Uint8Array(0);
    this.length = 0;
    return line;
  }
}

/** Payloads framed from a batch of lines, and the error that stopped the framing, if one did. */
export interface Framed {
  payloads: string[];
  error?: Error;
}

/** An SSE framer: fed the stream's lines batch by batch, then asked for the frame left open when it ended cleanly. */
export interface SseFramer {
  (lines: string[]): Framed;
  /** The payload of the frame in progress (no blank line after it yet), if any: what a stream that ended cleanly left. */
  end(): string[];
}

/**
 * Turns text/event-stream lines (read with `anyLineEnding`) into payloads:
 * `data:` lines of one frame are joined; a blank line ends the frame;
 * comments and other fields are ignored, and so is a line of JSON unless
 * `faults.jsonOutsideData` refuses it. A frame is one result, so it is
 * held to the same byte limit as a line (each of its lines already was, but
 * not their sum); the frames completed before one that is too large are
 * still handed over, as they may hold the run's terminal result.
 */
export function sseFramer(limits: Pick<LineLimits, "maxLineBytes">, faults: LineFaults = RESULT_LINE_FAULTS): SseFramer {
  let data: string[] = [];
  let bytes = 0;
  const end = () => {
    const rest = data.length ? [data.join("\n")] : [];
    data = [];
    bytes = 0;
    return rest;
  };
  const frame = (lines: string[]): Framed => {
    const payloads: string[] = [];
    for (const line of lines) {
      if (line === "") {
        if (data.length) payloads.push(data.join("\n"));
        data = [];
        bytes = 0;
      } else if (line.startsWith("data:")) {
        const value = line.slice(line.startsWith("data: ") ? 6 : 5);
        // The joining newline included.
        bytes += utf8Length(value) + (data.length ? 1 : 0);
        if (bytes > limits.maxLineBytes) return { payloads, error: faults.lineTooLarge(limits.maxLineBytes) };
        data.push(value);
      } else if (faults.jsonOutsideData && (line[0] === "{" || line[0] === "[")) {
        // No SSE field starts so: the frames completed before it are handed over, as for a frame too large.
        return { payloads, error: faults.jsonOutsideData() };
      }
    }
    return { payloads };
  };
  return Object.assign(frame, { end });
}

/** UTF-8 size of a string, without encoding it. */
function utf8Length(text: string): number {
  let n = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // U+0080..U+07FF take 2 bytes, the rest of the BMP 3; a surrogate pair (2 units) takes 4.
    if (c >= 0x80) n += c >= 0x800 && (c < 0xd800 || c > 0xdfff) ? 2 : 1;
  }
  return n;
}
