import { RunnerCallError } from "./errors";

export interface LineLimits {
  maxLineBytes: number;
  maxStreamBytes: number;
}

const NEWLINE = 10;

/**
 * Splits a byte stream into lines incrementally, yielding the complete lines
 * of each network chunk together (so callers can apply them as one batch).
 * Holds at most one partial line, never more than `maxLineBytes`.
 */
export async function* readLines(body: ReadableStream<Uint8Array>, limits: LineLimits): AsyncGenerator<string[]> {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;
  let total = 0;
  const take = (tail: Uint8Array): string => {
    const parts = pending.length ? [...pending, tail] : [tail];
    pending = [];
    pendingBytes = 0;
    if (parts.length === 1) return decoder.decode(parts[0]);
    const joined = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      joined.set(p, at);
      at += p.length;
    }
    return decoder.decode(joined);
  };
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.length;
      if (total > limits.maxStreamBytes) {
        throw new RunnerCallError("runner.stream_too_large", `result stream exceeded ${limits.maxStreamBytes} bytes`);
      }
      const lines: string[] = [];
      let start = 0;
      for (let i = value.indexOf(NEWLINE); i !== -1; i = value.indexOf(NEWLINE, start)) {
        if (pendingBytes + (i - start) > limits.maxLineBytes) throw lineTooLarge(limits);
        lines.push(take(value.subarray(start, i)));
        start = i + 1;
      }
      if (start < value.length) {
        const rest = value.subarray(start);
        pendingBytes += rest.length;
        if (pendingBytes > limits.maxLineBytes) throw lineTooLarge(limits);
        // Copy: the reader may reuse its buffer.
        pending.push(rest.slice());
      }
      if (lines.length) yield lines;
    }
    if (pendingBytes > 0) yield [take(new Uint8Array())];
  } finally {
    reader.releaseLock();
  }
}

function lineTooLarge(limits: LineLimits): RunnerCallError {
  return new RunnerCallError("runner.line_too_large", `a result line exceeded ${limits.maxLineBytes} bytes`);
}

/**
 * Turns text/event-stream lines into payloads: `data:` lines of one frame are
 * joined; a blank line ends the frame; comments and other fields are ignored.
 */
export function sseFramer(): (lines: string[]) => string[] {
  let data: string[] = [];
  return (lines) => {
    const out: string[] = [];
    for (const raw of lines) {
      const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
      if (line === "") {
        if (data.length) out.push(data.join("\n"));
        data = [];
      } else if (line.startsWith("data:")) {
        data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
      }
    }
    return out;
  };
}
