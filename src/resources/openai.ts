import * as z from "zod";
import type { ChatRequest } from "./chat-request";
import { fetchFailureReason } from "../lib/opaque-fetch-failure";
import { abortReason, attemptSignal, httpError, readJson, readText, upstreamFetch, UpstreamError, upstreamWords, type AttemptSignal, type TakeBytes } from "./upstream";
import { joinUrl } from "../lib/url";
import { isTransientStatus } from "../lib/http-status";
import { concatBytes } from "../lib/bytes";

/** Where and as whom the host calls a model; built from the model row at call time. */
export interface ProviderTarget {
  baseUrl: string;
  apiKey: string;
  model: string;
}

export interface CallOptions {
  signal: AbortSignal;
  maxBytes: number;
  /** The provider must answer (a stream: begin) within this long (see MODEL_ATTEMPT_TIMEOUT_MS). */
  attemptTimeoutMs: number;
  /** A begun stream the provider sends nothing on for this long fails (see MODEL_STREAM_IDLE_TIMEOUT_MS). */
  streamIdleMs: number;
  /** Counts a JSON answer's bytes as they are read, against what the host may hold at once. */
  take?: TakeBytes;
}

export const UsageSchema = z
  .looseObject({
    prompt_tokens: z.number().nullish(),
    completion_tokens: z.number().nullish(),
    total_tokens: z.number().nullish(),
  })
  .transform((u) => ({
    prompt_tokens: u.prompt_tokens ?? null,
    completion_tokens: u.completion_tokens ?? null,
    total_tokens: u.total_tokens ?? (u.prompt_tokens ?? 0) + (u.completion_tokens ?? 0),
  }));
export type Usage = z.output<typeof UsageSchema>;

const ChatCompletionSchema = z.looseObject({
  choices: z
    .array(
      z.looseObject({
        message: z.looseObject({ content: z.string().nullish(), tool_calls: z.array(z.unknown()).nullish() }),
        finish_reason: z.string().nullish(),
        error: z.unknown().optional(),
      }),
    )
    .min(1),
  usage: UsageSchema.nullish(),
});

export interface ChatResult {
  /** Provider extras on the message (e.g. reasoning_content) pass through. */
  message: { role: "assistant"; content: string | null; tool_calls?: unknown[]; [extra: string]: unknown };
  finish_reason: string | null;
  usage: Usage | null;
}

function headers(target: ProviderTarget, accept: string): Record<string, string> {
  return { authorization: `Bearer ${target.apiKey}`, "content-type": "application/json", accept };
}

function chatBody(target: ProviderTarget, req: ChatRequest, stream: boolean): string {
  // Usage is always asked for on a stream: the host records what the operator is billed, whatever the runner's extra says.
  const asked = req.extra.stream_options;
  const streamOptions = stream ? { stream_options: { ...(asked && typeof asked === "object" && !Array.isArray(asked) ? asked : {}), include_usage: true } } : {};
  return JSON.stringify({ ...req.extra, ...streamOptions, model: target.model, messages: req.messages, tools: req.tools, stream });
}

/** A 2xx answer, its attempt timer still running (the caller says when the provider has answered). */
async function post(target: ProviderTarget, path: string, body: string, accept: string, opts: CallOptions): Promise<{ res: Response; attempt: AttemptSignal }> {
  const attempt = attemptSignal(opts.signal, opts.attemptTimeoutMs, "the model provider");
  try {
    const res = await upstreamFetch(joinUrl(target.baseUrl, path), { method: "POST", headers: headers(target, accept), body, signal: attempt.signal });
    if (!res.ok) throw await httpError(res, "the model provider", attempt.signal);
    return { res, attempt };
  } catch (err) {
    attempt.dispose();
    throw err;
  }
}

/**
 * A JSON answer, read whole within the attempt's timeout: a provider that sends its headers and then stalls
 * or trickles its body has not answered, and another may do better.
 */
export async function postJson(target: ProviderTarget, path: string, body: string, opts: CallOptions, what: string): Promise<{ json: unknown; status: number }> {
  const { res, attempt } = await post(target, path, body, "application/json", opts);
  try {
    return { json: await readJson(res, opts.maxBytes, attempt.signal, what, opts.take), status: res.status };
  } finally {
    attempt.dispose();
  }
}

/**
 * A provider's error object (OpenAI-style `{message, type, code}`) or string, as the words that end an error's message
 * (upstreamWords: cut, and saying so, before the secrets are known).
 */
export function errorWords(error: unknown): { text: string; cutShort: boolean } {
  if (typeof error === "string") return upstreamWords(error);
  const e = error as { message?: unknown; type?: unknown; code?: unknown } | null;
  if (typeof e?.message !== "string") return upstreamWords(JSON.stringify(error));
  const about = [e.type, e.code].filter((v) => typeof v === "string" || typeof v === "number");
  return upstreamWords(about.length ? `${e.message} (${about.join(", ")})` : e.message);
}

/** An error a provider reported: judged by the status it names (a 400 is not retried elsewhere), its words kept. */
function reportedError(error: unknown, what: string): UpstreamError {
  const status = streamErrorStatus(error);
  const words = errorWords(error);
  return new UpstreamError(status === undefined ? "invalid_response" : "http", `${what} answered an error: ${words.text}`, status, { cutShort: words.cutShort });
}

/**
 * A 2xx whose body is an error, not an answer (OpenRouter answers so once the model has begun on the request; an empty
 * `choices` or `results` may stand beside it): the provider's failure. Asked only of a body that holds no answer.
 */
export function errorAnswer(json: unknown, what: string): UpstreamError | null {
  const error = typeof json === "object" && json !== null && !Array.isArray(json) ? (json as { error?: unknown }).error : undefined;
  return error === undefined || error === null ? null : reportedError(error, what);
}

/**
 * A choice that failed rather than finished: OpenRouter, once the model has begun, marks it `finish_reason: "error"`
 * with its `error` beside it, in a completion or in the chunk that ends a stream. Its error, if it gave one.
 */
export function choiceFailure(choice: { finish_reason?: unknown; error?: unknown }): { error?: unknown } | null {
  if (choice.error !== undefined && choice.error !== null) return { error: choice.error };
  return choice.finish_reason === "error" ? {} : null;
}

/** What a failed choice says, for an error's message. */
export const FINISHED_WITH_ERROR = 'ended the message with finish_reason "error" and no error beside it';

/** POST /chat/completions: one message back, tool calls included. */
export async function chatCompletion(target: ProviderTarget, req: ChatRequest, opts: CallOptions): Promise<ChatResult> {
  const res = await postJson(target, "/chat/completions", chatBody(target, req, false), opts, "the model provider");
  const parsed = ChatCompletionSchema.safeParse(res.json);
  if (!parsed.success) throw errorAnswer(res.json, "the model provider") ?? new UpstreamError("invalid_response", "the model provider's answer is not a chat completion", res.status);
  const choice = parsed.data.choices[0];
  // A 200 all the same: the message (often empty, or cut short) is no answer.
  const failed = choiceFailure(choice);
  if (failed) throw failed.error === undefined ? new UpstreamError("invalid_response", `the model provider ${FINISHED_WITH_ERROR}`, res.status) : reportedError(failed.error, "the model provider");
  const { tool_calls: rawToolCalls, content, ...extras } = choice.message;
  const toolCalls = rawToolCalls ?? [];
  return {
    message: { ...extras, role: "assistant", content: content ?? null, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) },
    finish_reason: choice.finish_reason ?? null,
    usage: parsed.data.usage ?? null,
  };
}

/**
 * The body again, its first chunk (already read) included. A provider that sends nothing (not even a
 * keep-alive) for `idleMs` while a chunk is awaited is let go, and the body fails with a `timeout`: a stream
 * is bounded otherwise only by the run's deadline.
 */
function withFirstChunk(first: Uint8Array, reader: ReadableStreamDefaultReader<Uint8Array>, idleMs: number): ReadableStream<Uint8Array> {
  let head: Uint8Array | undefined = first;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (head) {
          controller.enqueue(head);
          head = undefined;
          return;
        }
        let timer: ReturnType<typeof setTimeout> | undefined;
        const silent = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new UpstreamError("timeout", `the model provider sent nothing for ${idleMs} ms mid-stream`)), idleMs);
        });
        try {
          const next = await Promise.race([reader.read(), silent]);
          if (next.done) controller.close();
          else controller.enqueue(next.value);
        } catch (err) {
          reader.cancel(err).catch(() => {});
          throw err;
        } finally {
          clearTimeout(timer);
        }
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
}

/** The stream's next chunk; one that breaks off is the provider's fault (or, aborted, the abort's reason). */
async function nextChunk(reader: ReadableStreamDefaultReader<Uint8Array>, signal: AbortSignal): Promise<ReadableStreamReadResult<Uint8Array>> {
  try {
    return await reader.read();
  } catch (err) {
    reader.cancel().catch(() => {});
    throw abortReason(signal, new UpstreamError("network", `the model provider's stream broke off: ${fetchFailureReason(err)}`, undefined, { cause: err }));
  }
}

/** Bytes kept while waiting for a stream's first data field; a provider that sends more before it has answered. */
const MAX_STREAM_PREAMBLE_BYTES = 64 * 1024;
const DATA_FIELD = [0x64, 0x61, 0x74, 0x61]; // "data"

/**
 * The stream's bytes up to and including the start of its first `data` field (SSE comments, `: PROCESSING` keep-alives
 * a gateway sends while the request waits, are no answer yet), or null when it ends without one. Scanned byte by byte:
 * a line is a data field when it starts with "data" followed by ":" or its end.
 */
async function readUntilFirstData(reader: ReadableStreamDefaultReader<Uint8Array>, signal: AbortSignal): Promise<Uint8Array | null> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  /** How much of "data" the current line begins with; -1 once it cannot be a data field. */
  let matched = 0;
  const answers = (chunk: Uint8Array) => {
    for (const b of chunk) {
      if (b === 0x0a || b === 0x0d) {
        if (matched === DATA_FIELD.length) return true;
        matched = 0;
      } else if (matched === DATA_FIELD.length) {
        if (b === 0x3a) return true;
        matched = -1;
      } else if (matched >= 0) matched = b === DATA_FIELD[matched] ? matched + 1 : -1;
    }
    return false;
  };
  for (;;) {
    const next = await nextChunk(reader, signal);
    if (next.done) return null;
    chunks.push(next.value);
    size += next.value.length;
    if (answers(next.value) || size > MAX_STREAM_PREAMBLE_BYTES) break;
  }
  return concatBytes(chunks, size);
}

/**
 * The first event read whole (up to its blank line, within the preamble budget), and the provider fault it reports
 * if any: a gateway may answer 200, then say in its first event that its upstream failed (overloaded, throttled)
 * before any token. Nothing has reached the runner yet, so that call is still the host's to make elsewhere.
 */
async function readFirstEvent(head: Uint8Array, reader: ReadableStreamDefaultReader<Uint8Array>, signal: AbortSignal): Promise<{ bytes: Uint8Array; fault: UpstreamError | null }> {
  const decoder = new TextDecoder();
  const chunks = [head];
  let size = head.length;
  let text = decoder.decode(head, { stream: true });
  const dataLine = DATA_LINE_START.exec(text);
  const start = dataLine ? dataLine.index + dataLine[1].length : 0;
  // Each chunk is scanned once (from just before it, where a blank line may straddle the boundary), and the bytes are
  // joined once at the end: a provider dribbling its preamble a byte at a time costs linear work, not quadratic.
  let end = blankLineFrom(text, start);
  while (end < 0 && size <= MAX_STREAM_PREAMBLE_BYTES) {
    const next = await nextChunk(reader, signal);
    if (next.done) break;
    chunks.push(next.value);
    size += next.value.length;
    const scanned = text.length;
    text += decoder.decode(next.value, { stream: true });
    end = blankLineFrom(text, Math.max(start, scanned - BLANK_LINE_MAX_CHARS));
  }
  const event = text.slice(start, end < 0 ? undefined : end);
  const data = event.split(/\r\n|\n|\r/).filter((line) => /^data(:|$)/.test(line)).map((line) => line.replace(/^data:? ?/, "")).join("\n");
  return { bytes: concatBytes(chunks, size), fault: streamStartFault(data) };
}

/** Where a line that is a data field starts (after the line end before it, if any). */
const DATA_LINE_START = /(^|[\r\n])data(:|[\r\n]|$)/;
/**
 * Two line ends in a row: the end of an event. A lone CR is a line end only when no LF follows it (CRLF is one line
 * end, not two); a CR last in what has arrived counts, since whatever follows it ends a line all the same.
 */
const BLANK_LINE = /(?:\r\n|\n|\r(?!\n))(?:\r\n|\n|\r(?!\n))/g;
const BLANK_LINE_MAX_CHARS = 4;

function blankLineFrom(text: string, from: number): number {
  BLANK_LINE.lastIndex = from;
  return BLANK_LINE.exec(text)?.index ?? -1;
}

/** The HTTP status a provider's error object in a stream names (its code or status, or what its type says), if any. */
export function streamErrorStatus(error: unknown): number | undefined {
  const e = typeof error === "object" && error !== null ? (error as Record<string, unknown>) : {};
  const code = [e.code, e.status, e.status_code].find((v): v is number => typeof v === "number" && v >= 400 && v < 600);
  const type = typeof e.type === "string" ? e.type : "";
  return code ?? (/rate_limit/.test(type) ? 429 : /server_error|overloaded|unavailable/.test(type) ? 503 : /invalid_request|authentication|permission|not_found/.test(type) ? 400 : undefined);
}

/**
 * A first event that reports an error a provider fault would answer (isTransientStatus, as model.invoke judges an
 * answer: 5xx, 429, 408, or their types), at its top or in its first choice (OpenRouter's shape has both, beside a
 * choice that failed): another provider may do better.
 */
function streamStartFault(data: string): UpstreamError | null {
  let parsed: { error?: unknown; choices?: unknown };
  try {
    parsed = JSON.parse(data);
  } catch {
    return null;
  }
  if (typeof parsed !== "object" || parsed === null) return null;
  const choices = Array.isArray(parsed.choices) ? (parsed.choices as ({ index?: unknown; error?: unknown } | null)[]) : [];
  const error = parsed.error ?? choices.find((c) => (c?.index ?? 0) === 0)?.error;
  if (error === undefined || error === null) return null;
  const status = streamErrorStatus(error);
  if (status === undefined || !isTransientStatus(status)) return null;
  const e = typeof error === "object" && error !== null ? (error as Record<string, unknown>) : {};
  const words = upstreamWords(typeof e.message === "string" ? e.message : typeof error === "string" ? error : JSON.stringify(error));
  return new UpstreamError("http", `the model provider's stream failed before its first token: ${words.text}`, status, { cutShort: words.cutShort });
}

/**
 * POST /chat/completions with `stream: true`: the provider's SSE body, once
 * it answered 2xx as an event stream and sent its first data event whole. Until then the
 * call is still the host's to retry elsewhere: an answer that is not an event
 * stream, none within the attempt timeout, or a first event that is a provider
 * fault, is a provider fault.
 */
export async function openChatStream(target: ProviderTarget, req: ChatRequest, opts: CallOptions): Promise<ReadableStream<Uint8Array>> {
  const { res, attempt } = await post(target, "/chat/completions", chatBody(target, req, true), "text/event-stream", opts);
  try {
    const type = res.headers.get("content-type") ?? "";
    if (!/^\s*text\/event-stream\s*(;|$)/i.test(type)) {
      const body = await readText(res, 64 * 1024, attempt.signal).catch((err: unknown) => {
        // Cut off by the attempt's timeout or the call's end: that is why it ended (as httpError says), not its type.
        if (attempt.signal.aborted) throw abortReason(attempt.signal, err);
        return "";
      });
      const snippet = upstreamWords(body.trim());
      const message = `the model provider answered ${type || "without a content type"} instead of an event stream${snippet.text ? `: ${snippet.text}` : ""}`;
      throw new UpstreamError("invalid_response", message, res.status, { cutShort: snippet.cutShort });
    }
    if (!res.body) throw new UpstreamError("invalid_response", "the model provider answered without a body", res.status);
    const reader = res.body.getReader();
    const head = await readUntilFirstData(reader, attempt.signal);
    if (!head) throw new UpstreamError("invalid_response", "the model provider's stream ended before it began", res.status);
    const first = await readFirstEvent(head, reader, attempt.signal);
    if (first.fault) {
      reader.cancel().catch(() => {});
      throw first.fault;
    }
    attempt.answered();
    return withFirstChunk(first.bytes, reader, opts.streamIdleMs);
  } catch (err) {
    attempt.dispose();
    throw err;
  }
}
