import { modelsStore } from "../resources/models-store";
import { assertSameResource } from "./resource-identity";
import type { ProviderTarget } from "../resources/openai";
import { secretFragments, urlSecrets } from "../resources/secrets";
import { UpstreamError } from "../resources/upstream";
import type { ActionContext } from "./actions/context";
import { ApiError } from "./errors";
import { logUpstreamFailure, toApiError } from "./upstream-error";
import { modelSlot } from "../stores/secret-slots";

export type ModelOperation = "invoke" | "stream" | "rerank";

/** One model as the host calls it: its provider target and the secret fragments to scrub. */
export interface ModelAttempt {
  modelId: string;
  target: ProviderTarget;
  secrets: string[];
}

/**
 * The models to try for a call, in order: the one asked for, then (when the
 * agent configures fallbacks) the fallback models after it in the agent's
 * list that the run may use for the same operation.
 */
export function modelCandidates(ctx: ActionContext, requested: string, operation: ModelOperation): string[] {
  const { models, fallback_models: fallbacks } = ctx.snapshot.resources;
  const at = fallbacks.indexOf(requested);
  const usable = (id: string) => models.some((m) => m.model_id === id && (m.operations as readonly string[]).includes(operation));
  return [requested, ...(at >= 0 ? fallbacks.slice(at + 1) : fallbacks).filter((id) => id !== requested && usable(id))];
}

/** The model's row, with its secret, read at call time (never from the run context). */
async function attemptOf(ctx: ActionContext, modelId: string): Promise<ModelAttempt> {
  const row = await modelsStore(ctx.db).get(modelId);
  if (!row) throw new ApiError("not_found", `model ${modelId} is no longer registered on this host`, { details: { model_id: modelId } });
  assertSameResource(ctx, "models", modelId, row.createdAt);
  const apiKey = await ctx.db.secrets.open(row.apiKey, modelSlot(row));
  return { modelId, target: { baseUrl: row.baseUrl, apiKey, model: row.providerModel }, secrets: secretFragments([apiKey, ...urlSecrets(row.baseUrl)]) };
}

/**
 * Run `call` on the requested model, falling back to the next candidate when
 * the provider failed on its side (unreachable, 5xx, 429, garbage). Each
 * fallback is recorded in the ledger; so is the final failure.
 */
export async function withModelFallback<T>(
  ctx: ActionContext,
  requested: string,
  operation: ModelOperation,
  call: (model: ModelAttempt) => Promise<T>,
): Promise<{ value: T; model: ModelAttempt }> {
  const candidates = modelCandidates(ctx, requested, operation);
  for (let i = 0; ; i++) {
    const modelId = candidates[i];
    const next = candidates[i + 1];
    let model: ModelAttempt | undefined;
    try {
      model = await attemptOf(ctx, modelId);
      return { value: await call(model), model };
    } catch (err) {
      const gone = err instanceof ApiError && err.code === "not_found";
      const failure = toApiError(err, model?.secrets ?? [], { model_id: modelId, operation }, { runId: ctx.snapshot.runId, action: `model ${modelId} (${operation})` });
      logUpstreamFailure(ctx, `model ${modelId} (${operation})`, failure);
      if (next && (gone || (err instanceof UpstreamError && err.providerFault))) {
        await ctx.ledger.append([{ type: "model.fallback", data: { model_id: modelId, next_model_id: next, operation, error: failure.message } }]);
        continue;
      }
      await ctx.ledger.append([{ type: "model.failed", data: { model_id: modelId, requested_model_id: requested, operation, code: failure.code, error: failure.message } }]);
      throw failure;
    }
  }
}

