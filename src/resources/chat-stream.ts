import { readLines, SSE_FIELD_BYTES, sseFramer, type LineFaults } from "../runner/lines";
import { redact, redactValue, StreamRedactors } from "./secrets";
import type { ChatResult, Usage } from "./openai";
import { choiceFailure, errorWords, FINISHED_WITH_ERROR, streamErrorStatus, UsageSchema } from "./openai";
import { UpstreamError, upstreamWords, type TakeBytes } from "./upstream";
import { describeError, loggedError } from "../lib/describe-error";
import { opaqueFetchFailure } from "../lib/opaque-fetch-failure";
import { isTransientStatus } from "../lib/http-status";
import { keptIntegerText, parseKeepingIntegers } from "../lib/exact-json";

/**
 * A stream the provider ended badly after it began: closed before saying it
 * was done (`stream_closed`), or reported an error inside it (`provider_error`).
 */
export class ModelStreamError extends UpstreamError {
  constructor(
    readonly code: "stream_closed" | "provider_error",
    message: string,
    options?: { cause?: unknown; status?: number; cutShort?: boolean },
  ) {
    super("invalid_response", message, options?.status, options);
  }

  /** The provider's error object, as the stream's error line tells it (its words last, cut short and saying so). */
  static reported(error: unknown): ModelStreamError {
    const words = errorWords(error);
    return new ModelStreamError("provider_error", `the model provider reported an error mid-stream: ${words.text}`, { status: streamErrorStatus(error), cutShort: words.cutShort });
  }

  /** Worth trying again: a cut-off stream, or an error the provider names as its own (5xx, 429, 408) or does not qualify. */
  get retryable(): boolean {
    return this.status === undefined || isTransientStatus(this.status);
  }
}

/**
 * `model.stream` NDJSON lines (PROTOCOL §8): a `delta` per provider chunk, as
 * it arrives, then one `completed` (the assembled message, finish reason,
 * usage) or one `error`. Provider-neutral: the runner never sees SSE framing.
 */
export type ModelStreamLine =
  | { type: "delta"; chunk: Record<string, unknown> & { role: "assistant" } }
  | ({ type: "completed"; model_id: string } & ChatResult)
  | { type: "error"; error: { code: string; message: string; retryable: boolean; details: Record<string, unknown> } };

export interface StreamEnd {
  result?: ChatResult;
  error?: { code: string; message: string };
}

export interface ChatStreamOptions {
  modelId: string;
  maxLineBytes: number;
  maxBytes: number;
  /** Secret fragments of the model (its key, credentials in its URL): scrubbed from every line, as an upstream may echo them. */
  secrets: readonly string[];
  /** The error line for a failure mid-stream (deadline, run stopped, provider), its text scrubbed of secrets. */
  describeError: (err: unknown) => { code: string; message: string; retryable: boolean };
  /** Called once, after the last line is queued and before the stream closes (ledger write), or when the runner cancels. */
  onEnd: (end: StreamEnd) => Promise<void>;
  /** The runner went away: stop the provider call. */
  onCancel: () => void;
  /**
   * The provider call's signal. Its abort (the run ended, its deadline passed) ends the stream with an
   * error line even when nothing is reading it: a pull in flight would notice, a stalled reader does not.
   */
  signal: AbortSignal;
  /**
   * Counts the text the stream holds for its `completed` line (the message assembled from its deltas), against what the
   * host may hold at once; throws to end the stream.
   */
  take?: TakeBytes;
}

/** A model stream re-framed for the runner. */
export interface ModelStream {
  body: ReadableStream<Uint8Array>;
  /** Settles once the stream's end is recorded (`onEnd` done), however it ended. */
  ended: Promise<void>;
  /** The runner went away without cancelling `body` (its request was dropped on the way): as a cancel. */
  close: () => Promise<void>;
}

type ToolCallDelta = { index?: number; id?: string; type?: string; function?: { name?: string; arguments?: string } };

/**
 * Joins streamed tool-call fragments by index, as OpenAI-compatible providers
 * send them, and gives back the fragments as the runner may see them: each
 * call's arguments scrubbed like content, a secret split across fragments
 * held back until it can be told; the rest of a fragment (its id, its name) scrubbed as it is.
 */
class ToolCallAssembler {
  /** By index, as sent: a Map, so a stray large index costs one entry, not a sparse array's holes. */
  private readonly calls = new Map<number, { id?: string; type: string; function: { name: string; arguments: string } }>();
  /** Characters of names and arguments kept for the result (a name repeated whole is not kept again). */
  keptChars = 0;
  private readonly shown: StreamRedactors<number>;
  constructor(private readonly secrets: readonly string[]) {
    this.shown = new StreamRedactors(secrets);
  }

  add(deltas: unknown): unknown {
    if (!Array.isArray(deltas)) return redactValue(deltas, this.secrets);
    return (deltas as unknown[]).map((item) => {
      const raw = toolCallDelta(item, this.calls.size);
      const i = raw.index ?? this.calls.size;
      let call = this.calls.get(i);
      if (!call) this.calls.set(i, (call = { type: "function", function: { name: "", arguments: "" } }));
      if (raw.id) call.id = raw.id;
      if (raw.type) call.type = raw.type;
      // Most providers send a name once, some in pieces (Gemini), some whole again in every fragment (MiniMax via NVIDIA
      // NIM): a fragment repeating the name so far is that name, not more of it, and reaches the runner without it, so
      // a runner joining the fragments' names (as OpenAI's Python client does) gets the name once too.
      const name = raw.function?.name;
      let fragment = raw;
      if (name && name === call.function.name) {
        const { name: _repeated, ...rest } = raw.function!;
        fragment = { ...raw, function: rest };
      } else if (name) {
        call.function.name += name;
        this.keptChars += name.length;
      }
      if (typeof fragment.function?.arguments !== "string") return redactValue(fragment, this.secrets);
      const { arguments: args, ...named } = fragment.function;
      call.function.arguments += args;
      this.keptChars += args.length;
      const shown = redactValue({ ...fragment, function: named }, this.secrets) as ToolCallDelta;
      return { ...shown, function: { ...shown.function, arguments: this.shown.push(i, args) } };
    });
  }

  /** The argument text still held back, once nothing more will arrive: one fragment per call that has some. */
  flush(): ToolCallDelta[] {
    return this.shown.flush().map(([index, held]) => ({ index, function: { arguments: held } }));
  }

  result(): unknown[] {
    return [...this.calls].sort(([a], [b]) => a - b).map(([, call]) => call);
  }
}

/** Parallel tool calls in one answer, at most: an index past it is a provider's error, not a call. */
const MAX_TOOL_CALLS = 128;
/** Characters of a bad index (as JSON) an error quotes: enough for any number, not a provider's whole object. */
const INDEX_QUOTED_CHARS = 40;

/** A tool-call fragment as sent, checked for what assembling relies on: an object, and an index that names a call. */
function toolCallDelta(item: unknown, known: number): ToolCallDelta {
  if (typeof item !== "object" || item === null || Array.isArray(item)) throw new UpstreamError("invalid_response", "the model provider sent a tool call fragment that is not an object");
  const raw = item as ToolCallDelta;
  const index = raw.index ?? undefined;
  if (index !== undefined && !(Number.isInteger(index) && index >= 0 && index < MAX_TOOL_CALLS)) {
    // Quoted last, cut and saying so: a key sent as the index is scrubbed where the message is shown, its cut half too.
    const quoted = upstreamWords(JSON.stringify(index), INDEX_QUOTED_CHARS);
    throw new UpstreamError("invalid_response", `the model provider sent a tool call fragment whose index is not 0 to ${MAX_TOOL_CALLS - 1}: ${quoted.text}`, undefined, { cutShort: quoted.cutShort });
  }
  if (index === undefined && known >= MAX_TOOL_CALLS) throw new UpstreamError("invalid_response", `the model provider sent more than ${MAX_TOOL_CALLS} tool calls`);
  return raw;
}

const encoder = new TextEncoder();
/**
 * Lines as NDJSON, each scrubbed of the secrets already, once, where its text came in: a delta's text in the stream of
 * its field (across pieces), the rest of it as it is, a `completed` line's message whole, an error line's words by
 * `describeError`. Scrubbed again, a secret inside the `[redacted]` that replaced a longer one would take it apart.
 */
const ndjson = (lines: ModelStreamLine[]) => encoder.encode(lines.map((l) => `${JSON.stringify(l)}\n`).join(""));

/**
 * What the host cannot read of a provider's stream, told as the provider's (a runner's result-stream wording would
 * blame the runner): bytes that are not UTF-8 are garbage another try may not repeat; an event or a stream past the
 * host's limits is an answer too large, as model.invoke's would be, and not retryable.
 */
const PROVIDER_STREAM_FAULTS: LineFaults = {
  notUtf8: (cause) => new UpstreamError("invalid_response", "the model provider's stream is not valid UTF-8", undefined, { cause }),
  lineTooLarge: (max) => new UpstreamError("too_large", `the model provider's stream sent an event over ${max} bytes`),
  streamTooLarge: (max) => new UpstreamError("too_large", `the model provider's stream exceeded ${max} bytes, the most the host reads of one answer`),
};

/** Parse the provider's SSE body incrementally and re-frame it as NDJSON, one network chunk at a time. */
export function chatStreamToNdjson(providerBody: ReadableStream<Uint8Array>, opts: ChatStreamOptions): ModelStream {
  // A line the body ends inside belongs to an event that never finished: dropped (it may end mid-character, too).
  const limits = { maxLineBytes: opts.maxLineBytes, maxStreamBytes: opts.maxBytes };
  const lines = readLines(providerBody, limits, { anyLineEnding: true, dropUnended: true, fieldBytes: SSE_FIELD_BYTES, faults: PROVIDER_STREAM_FAULTS });
  const frame = sseFramer(limits, PROVIDER_STREAM_FAULTS);
  const tools = new ToolCallAssembler(opts.secrets);
  let content = "";
  /** The message's other text fields (reasoning_content, refusal, ...), each joined as streamed, as model.invoke gives them. */
  const texts: Record<string, string> = {};
  // A secret the provider echoes is split across deltas: each text field of a delta (content, reasoning_content,
  // refusal, ...) is scrubbed with what came before it in the same field.
  const shown = new StreamRedactors<string>(opts.secrets);
  let finishReason: string | null = null;
  let usage: Usage | null = null;
  let finished = false;
  let ended = false;
  let recorded!: () => void;
  const endRecorded = new Promise<void>((resolve) => (recorded = resolve));
  /** The end is recorded once, whichever of the last line and a cancel by the runner comes first. */
  const endOnce = (end: StreamEnd) => {
    if (ended) return Promise.resolve();
    ended = true;
    return opts.onEnd(end).finally(recorded);
  };

  const assembled = (): ChatResult => {
    const toolCalls = tools.result();
    return {
      // A tool-call-only answer has no content: null, as model.invoke gives it.
      message: { ...texts, role: "assistant", content: content === "" && toolCalls.length ? null : content, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) },
      finish_reason: finishReason,
      usage,
    };
  };

  /** Lines for one provider payload; `done` when the provider said so. */
  const translate = (payload: string, out: ModelStreamLine[]): boolean => {
    if (payload.trim() === "[DONE]") return true;
    // An event whose data is empty is not dispatched (WHATWG SSE): a keep-alive, not a chunk.
    if (payload === "") return false;
    let chunk: { choices?: { index?: unknown; delta?: Record<string, unknown>; finish_reason?: string | null; error?: unknown }[]; usage?: unknown; error?: unknown };
    try {
      // Whole numbers past 2^53 kept as written, as in model.invoke.
      chunk = parseKeepingIntegers(payload) as typeof chunk;
    } catch {
      throw new UpstreamError("invalid_response", "the model provider sent a stream chunk that is not JSON");
    }
    if (typeof chunk !== "object" || chunk === null || keptIntegerText(chunk) !== undefined) throw new UpstreamError("invalid_response", "the model provider sent a stream chunk that is not an object");
    if (chunk.error !== undefined && chunk.error !== null) throw ModelStreamError.reported(chunk.error);
    if (chunk.usage) {
      const parsed = UsageSchema.safeParse(chunk.usage);
      if (parsed.success) usage = parsed.data;
    }
    // Asked for several (`n` in extra), a provider interleaves the choices, each naming its index: the message is the first's.
    const choice = Array.isArray(chunk.choices) ? chunk.choices.find((c) => (c?.index ?? 0) === 0) : undefined;
    if (!choice) return false;
    // A choice that failed (`finish_reason: "error"`) ends the message unfinished: its delta still goes out, then the error.
    const failed = choiceFailure(choice);
    if (choice.finish_reason && !failed) finishReason = choice.finish_reason;
    const sent = { ...choice.delta };
    const keptBefore = tools.keptChars;
    let kept = 0;
    for (const [field, value] of Object.entries(sent)) {
      if (field === "role" || typeof value !== "string") continue;
      if (field === "content") content += value;
      else texts[field] = (texts[field] ?? "") + value;
      kept += value.length;
    }
    // The delta as the runner sees it: text through its field's stream, tool calls through the assembler, the rest (and
    // the fields' names) scrubbed as they are.
    const delta: Record<string, unknown> = {};
    for (const [field, value] of Object.entries(sent)) {
      if (field === "role") continue;
      delta[redact(field, opts.secrets)] = typeof value === "string" ? shown.push(field, value) : field === "tool_calls" ? tools.add(value) : redactValue(value, opts.secrets);
    }
    // What the delta added to the message kept for the `completed` line, counted before its line goes out.
    opts.take?.(kept + tools.keptChars - keptBefore);
    const meaningful = Object.entries(delta).some(([k, v]) => k !== "role" && v !== null && v !== undefined && v !== "");
    if (meaningful) out.push({ type: "delta", chunk: { ...delta, role: "assistant" } });
    if (failed?.error !== undefined) throw ModelStreamError.reported(failed.error);
    if (failed) throw new ModelStreamError("provider_error", `the model provider ${FINISHED_WITH_ERROR}`);
    return false;
  };

  /** Let go of the provider's body: nothing more is read from it. */
  const stopProvider = async () => {
    await lines.return(undefined).catch(() => {});
    await providerBody.cancel().catch(() => {});
  };

  /** The last line and the end's record, once: the provider's end, a failure and the call's abort may race. */
  const end = async (controller: ReadableStreamDefaultController<Uint8Array>, last: ModelStreamLine, result: StreamEnd) => {
    if (finished) return;
    finished = true;
    await stopProvider();
    if (ended) return; // the runner cancelled meanwhile: the stream is gone
    controller.enqueue(ndjson([last]));
    await endOnce(result).catch((err: Error) => console.error(`model.stream: ledger write failed: ${loggedError(err)}`));
    try {
      controller.close();
    } catch {
      // cancelled by the runner while the end was being recorded
    }
  };

  /** A failure, told to the runner as the stream's last line and recorded. */
  const fail = async (controller: ReadableStreamDefaultController<Uint8Array>, err: unknown) => {
    if (finished) return; // cancelled by the runner meanwhile, or already failed
    const { code, message, retryable } = opts.describeError(err);
    await end(controller, { type: "error", error: { code, message, retryable, details: { model_id: opts.modelId } } }, { error: { code, message } });
  };

  /** The runner went away: stop the provider and record it. */
  const cancel = async () => {
    if (finished && ended) return;
    finished = true;
    opts.onCancel();
    await stopProvider();
    await endOnce({ error: { code: "cancelled", message: "the runner closed the stream" } }).catch(() => {});
  };

  let controllerOf!: ReadableStreamDefaultController<Uint8Array>;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controllerOf = controller;
      if (opts.signal.aborted) return fail(controller, opts.signal.reason);
      opts.signal.addEventListener("abort", () => void fail(controller, opts.signal.reason), { once: true });
    },
    async pull(controller) {
      if (finished) return;
      try {
        // Loop until this pull has something to send: keep-alive comments and role-only chunks send nothing.
        for (;;) {
          const next = await lines.next().catch((err: unknown): IteratorResult<string[], void> => {
            // The connection reset is a stream cut off, like one that merely stops; the host's limits, a stopped call and a
            // provider silent too long (an UpstreamError timeout) say why themselves.
            const said = opts.signal.aborted || err instanceof UpstreamError;
            // Once the provider gave the finish reason the message is whole: a reset loses only its usage and [DONE], as a
            // stream that merely stops there does.
            if (!said && finishReason !== null) return { done: true, value: undefined };
            throw said ? err : new ModelStreamError("stream_closed", `the model provider's stream broke off: ${opaqueFetchFailure(err) ?? describeError(err)}`, { cause: err });
          });
          if (finished) return; // ended meanwhile (cancelled, or the call was stopped): nothing more goes out
          const out: ModelStreamLine[] = [];
          let done = false;
          let failure: unknown;
          if (next.done) {
            // A provider says it is done ([DONE], or a finish reason); a stream that merely stops was cut off.
            if (finishReason === null) failure = new ModelStreamError("stream_closed", "the model provider closed the stream before it finished");
            done = true;
          } else {
            try {
              const framed = frame(next.value);
              for (const payload of framed.payloads) if ((done = translate(payload, out))) break;
              if (!done) failure = framed.error;
            } catch (err) {
              failure = err;
            }
          }
          // What arrived before a failure in the same network chunk is still the runner's.
          if (out.length) controller.enqueue(ndjson(out));
          if (failure) throw failure;
          if (done) {
            const held = Object.fromEntries(shown.flush().map(([field, text]) => [redact(field, opts.secrets), text]));
            const heldCalls = tools.flush();
            if (Object.keys(held).length || heldCalls.length) {
              const chunk = { role: "assistant" as const, ...held, ...(heldCalls.length ? { tool_calls: heldCalls } : {}) };
              controller.enqueue(ndjson([{ type: "delta", chunk }]));
            }
            const result = assembled();
            // The message as the provider sent it, joined: scrubbed whole, once.
            const shownResult = redactValue(result, opts.secrets) as ChatResult;
            return await end(controller, { type: "completed", model_id: opts.modelId, ...shownResult }, { result });
          }
          if (out.length) return;
        }
      } catch (err) {
        await fail(controller, err);
      }
    },
    cancel,
  });

  return {
    body,
    ended: endRecorded,
    async close() {
      await cancel();
      try {
        // Whatever pumps the stream to the gone runner stops waiting for it to read. Ended, not errored: workerd
        // reports an error of a stream its RPC pipe reads as an uncaught exception of the run's object.
        controllerOf.close();
      } catch {
        // already closed or cancelled
      }
    },
  };
}
