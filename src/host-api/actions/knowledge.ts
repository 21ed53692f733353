import { knowledgeStore } from "../../resources/knowledge-store";
import { retrieve } from "../../resources/retrieval";
import { redactValue, secretFragments, urlSecrets } from "../../resources/secrets";
import { answerHold } from "../answer-budget";
import { callSignal } from "../call-signal";
import { assertSameResource } from "../resource-identity";
import { ApiError } from "../errors";
import { logUpstreamFailure, toApiError } from "../upstream-error";
import type { ActionTable, Handler } from "./context";
import { knowledgeBaseSlot } from "../../stores/secret-slots";

/** `top_k` is capped by the params schema (≤ 100) and enforced on the endpoint's answer. */
const knowledgeRetrieve: Handler<"knowledge.retrieve"> = async (ctx, p) => {
  const kb = await knowledgeStore(ctx.db).get(p.kb_id);
  if (!kb) throw new ApiError("not_found", `knowledge base ${p.kb_id} is no longer registered on this host`);
  assertSameResource(ctx, "knowledge_bases", p.kb_id, kb.createdAt);
  const apiKey = await ctx.db.secrets.open(kb.apiKey, knowledgeBaseSlot(kb));
  const secrets = secretFragments([apiKey, ...urlSecrets(kb.endpoint)]);
  const startedAt = Date.now();
  const call = callSignal(ctx);
  const hold = answerHold(ctx.config.RESOURCE_RESPONSE_BUDGET_BYTES);
  try {
    const entries = await retrieve(
      { endpoint: kb.endpoint, apiKey },
      { query: p.query, topK: p.top_k, filters: p.filters },
      { signal: call.signal, maxBytes: ctx.config.RESOURCE_RESPONSE_MAX_BYTES, attemptTimeoutMs: ctx.config.MODEL_ATTEMPT_TIMEOUT_MS, take: hold.take },
    );
    await ctx.ledger.append([{ type: "knowledge.retrieved", data: { kb_id: p.kb_id, top_k: p.top_k, entry_count: entries.length, duration_ms: Date.now() - startedAt } }]);
    return { kb_id: p.kb_id, entries: redactValue(entries, secrets) as typeof entries };
  } catch (err) {
    // Its answer is dropped: not held while the failure is recorded, where it could get another call refused.
    hold.release();
    const failure = toApiError(err, secrets, { kb_id: p.kb_id }, { runId: ctx.snapshot.runId, action: `knowledge base ${p.kb_id}` });
    logUpstreamFailure(ctx, `knowledge base ${p.kb_id}`, failure);
    await ctx.ledger.append([{ type: "knowledge.failed", data: { kb_id: p.kb_id, code: failure.code, error: failure.message } }]);
    throw failure;
  } finally {
    call.dispose();
    hold.release();
  }
};

export const knowledgeActions: ActionTable = {
  "knowledge.retrieve": knowledgeRetrieve,
};
