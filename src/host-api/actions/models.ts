import { chatStreamToNdjson, ModelStreamError, type StreamEnd } from "../../resources/chat-stream";
import { ModelInputError, toChatRequest, type ChatRequest } from "../../resources/chat-request";
import { chatCompletion, openChatStream, type CallOptions, type Usage } from "../../resources/openai";
import { rerank } from "../../resources/rerank";
import { redactValue } from "../../resources/secrets";
import { UpstreamError } from "../../resources/upstream";
import { answerHold, type AnswerHold } from "../answer-budget";
import { artifactInputs } from "../model-artifacts";
import { callSignal } from "../call-signal";
import { ApiError } from "../errors";
import { loggedError } from "../../lib/describe-error";
import { loggedText } from "../../lib/log-text";
import { withModelFallback, type ModelOperation } from "../model-fallback";
import { StreamReply } from "../stream-reply";
import { shownUpstreamMessage } from "../upstream-error";
import type { ActionContext, ActionTable, Handler } from "./context";

/** The provider request; images, files and audio named by artifact_id are read in first, their size held in `images` until it is sent. */
async function chatRequest(ctx: ActionContext, p: Parameters<typeof toChatRequest>[0], images: AnswerHold): Promise<ChatRequest> {
  const inline = await artifactInputs(ctx, p.messages, images);
  try {
    return toChatRequest(p, inline);
  } catch (err) {
    if (err instanceof ModelInputError) throw new ApiError("invalid_argument", err.message, { details: err.details });
    throw err;
  }
}

/** Provider usage in the run ledger, one record per answered call. */
function recordUsage(ctx: ActionContext, call: { modelId: string; requested: string; operation: ModelOperation; usage: Usage | null; startedAt: number }) {
  return ctx.ledger.append([
    {
      type: "model.usage",
      data: {
        model_id: call.modelId,
        requested_model_id: call.requested,
        operation: call.operation,
        prompt_tokens: call.usage?.prompt_tokens ?? null,
        completion_tokens: call.usage?.completion_tokens ?? null,
        total_tokens: call.usage?.total_tokens ?? null,
        duration_ms: Date.now() - call.startedAt,
      },
    },
  ]);
}

function callOptions(ctx: ActionContext, signal: AbortSignal, hold?: AnswerHold): CallOptions {
  const c = ctx.config;
  return { signal, maxBytes: c.RESOURCE_RESPONSE_MAX_BYTES, attemptTimeoutMs: c.MODEL_ATTEMPT_TIMEOUT_MS, streamIdleMs: c.MODEL_STREAM_IDLE_TIMEOUT_MS, take: hold?.take };
}

/** An attempt's answer is held until the call is answered; a failed attempt's is dropped at once, so neither a fallback nor another call is refused for it. */
async function afresh<T>(hold: AnswerHold, attempt: () => Promise<T>): Promise<T> {
  try {
    return await attempt();
  } catch (err) {
    hold.release();
    throw err;
  }
}

const modelInvoke: Handler<"model.invoke"> = async (ctx, p) => {
  const images = answerHold(ctx.config.RESOURCE_RESPONSE_BUDGET_BYTES);
  const startedAt = Date.now();
  const call = callSignal(ctx);
  const hold = answerHold(ctx.config.RESOURCE_RESPONSE_BUDGET_BYTES);
  try {
    const request = await chatRequest(ctx, p, images);
    const opts = callOptions(ctx, call.signal, hold);
    const { value, model } = await withModelFallback(ctx, p.model_id, "invoke", (m) => afresh(hold, () => chatCompletion(m.target, request, opts)));
    await recordUsage(ctx, { modelId: model.modelId, requested: p.model_id, operation: "invoke", usage: value.usage, startedAt });
    // An upstream may echo what it was sent: the runner never sees the model's credentials.
    return { model_id: model.modelId, ...(redactValue(value, model.secrets) as typeof value) };
  } finally {
    call.dispose();
    hold.release();
    images.release();
  }
};

/**
 * The NDJSON error line for a failure mid-stream, its message scrubbed of the
 * model's secrets: an aborted call reports why it was aborted; a stream the
 * provider cut off or reported an error in says so in its code.
 */
export function streamError(err: unknown, signal: AbortSignal, secrets: readonly string[]): { code: string; message: string; retryable: boolean } {
  const cause: unknown = signal.aborted ? signal.reason : err;
  const message = shownUpstreamMessage(cause, secrets);
  // The host's own refusals say whether they are worth retrying (a full answer budget is).
  if (cause instanceof ApiError) return { code: cause.code, message, retryable: cause.retryable ?? false };
  if (cause instanceof ModelStreamError) return { code: cause.code, message, retryable: cause.retryable };
  return { code: "runtime_error", message, retryable: cause instanceof UpstreamError ? cause.providerFault : true };
}

/**
 * Fallback applies until the provider accepted the call; from the first
 * chunk on, the stream is the runner's and a failure ends it with an error line.
 */
const modelStream: Handler<"model.stream"> = async (ctx, p) => {
  const images = answerHold(ctx.config.RESOURCE_RESPONSE_BUDGET_BYTES);
  const startedAt = Date.now();
  const call = callSignal(ctx);
  // The message the stream assembles for its `completed` line is held until the stream ends, as an invoke's answer is.
  const hold = answerHold(ctx.config.RESOURCE_RESPONSE_BUDGET_BYTES);
  try {
    const request = await chatRequest(ctx, p, images);
    const opts = callOptions(ctx, call.signal);
    // Sent once the provider accepted it: its images are held no longer.
    const { value: body, model } = await withModelFallback(ctx, p.model_id, "stream", (m) => openChatStream(m.target, request, opts)).finally(() => images.release());
    const onEnd = async (end: StreamEnd) => {
      call.dispose();
      hold.release();
      const what = `run ${ctx.snapshot.runId}: model ${model.modelId} (stream)`;
      // The provider's words, scrubbed (streamError): one line of the log all the same.
      if (!end.result) console.warn(`${what} ended early (${end.error?.code}): ${loggedText(end.error?.message ?? "")}`);
      // Shaped as every model.failed is (model-fallback.ts): its words under `error`.
      const failed = { model_id: model.modelId, requested_model_id: p.model_id, operation: "stream", code: end.error?.code, error: end.error?.message };
      const record = end.result
        ? recordUsage(ctx, { modelId: model.modelId, requested: p.model_id, operation: "stream", usage: end.result.usage, startedAt })
        : ctx.ledger.append([{ type: "model.failed", data: failed }]);
      // Logged here, where the run is known: the runner has had the stream's end already.
      await record.catch((err: unknown) => console.error(`${what}: its end not recorded: ${loggedError(err)}`));
    };
    const stream = chatStreamToNdjson(body, {
      modelId: model.modelId,
      maxLineBytes: ctx.config.RUNNER_MAX_LINE_BYTES,
      maxBytes: ctx.config.RESOURCE_RESPONSE_MAX_BYTES,
      secrets: model.secrets,
      describeError: (err) => streamError(err, call.signal, model.secrets),
      onEnd,
      onCancel: () => call.abort(),
      signal: call.signal,
      take: hold.take,
    });
    return new StreamReply(stream.body, "application/x-ndjson", { ended: stream.ended, close: stream.close });
  } catch (err) {
    call.dispose();
    images.release();
    hold.release();
    throw err;
  }
};

const modelRerank: Handler<"model.rerank"> = async (ctx, p) => {
  const startedAt = Date.now();
  const call = callSignal(ctx);
  const hold = answerHold(ctx.config.RESOURCE_RESPONSE_BUDGET_BYTES);
  try {
    const opts = callOptions(ctx, call.signal, hold);
    const input = { query: p.query, documents: p.documents, topK: p.top_k ?? undefined };
    const { value, model } = await withModelFallback(ctx, p.model_id, "rerank", (m) => afresh(hold, () => rerank(m.target, input, opts)));
    await recordUsage(ctx, { modelId: model.modelId, requested: p.model_id, operation: "rerank", usage: value.usage, startedAt });
    return { model_id: model.modelId, results: value.results, usage: value.usage };
  } finally {
    call.dispose();
    hold.release();
  }
};

export const modelActions: ActionTable = {
  "model.invoke": modelInvoke,
  "model.stream": modelStream,
  "model.rerank": modelRerank,
};
