import * as z from "zod";
import { errorAnswer, postJson, UsageSchema, type CallOptions, type ProviderTarget, type Usage } from "./openai";
import { UpstreamError } from "./upstream";

/** The ranking is listed under `results` (Cohere and those that copy it) or `data` (Voyage): the same entries. */
const RerankAnswerSchema = z.looseObject({
  results: z.array(z.unknown()).optional(),
  data: z.array(z.unknown()).optional(),
  usage: UsageSchema.nullish(),
});

const EXPECTED = "{results: [{index, relevance_score}]}";

export interface RerankResult {
  results: { index: number; score: number }[];
  usage: Usage | null;
}

/**
 * One entry of a ranking, checked: a ranking the host cannot trust is the provider's invalid answer, never one with a
 * score made up (a missing one read as 0) or a document dropped (an index that names none sent).
 */
function ranked(entry: unknown, at: number, documents: number, status: number): { index: number; score: number } {
  const invalid = (why: string) => new UpstreamError("invalid_response", `the rerank provider ${why}`, status);
  const r = (typeof entry === "object" && entry !== null ? entry : {}) as { index?: unknown; relevance_score?: unknown; score?: unknown };
  if (typeof r.index !== "number" || !Number.isInteger(r.index)) throw invalid(`answered a result (${at}) that names no document index`);
  if (r.index < 0 || r.index >= documents) throw invalid(`ranked document ${r.index}, which was not sent (${documents} documents, counted from 0)`);
  const score = r.relevance_score ?? r.score;
  if (typeof score !== "number" || !Number.isFinite(score)) throw invalid(`answered a result for document ${r.index} with no score`);
  return { index: r.index, score };
}

/**
 * POST /rerank, as Cohere defined it and Jina, vLLM and Xinference serve it:
 * `{model, query, documents, top_n}` → `{results: [{index, relevance_score}]}` (`score` read too); Voyage's answer,
 * its list under `data`, is read alike. TEI's own /rerank is another API (`texts` in, a bare list out): its answer is
 * an invalid one here.
 */
export async function rerank(target: ProviderTarget, input: { query: string; documents: string[]; topK?: number }, opts: CallOptions): Promise<RerankResult> {
  const documents = input.documents.length;
  const body = JSON.stringify({ model: target.model, query: input.query, documents: input.documents, top_n: Math.min(input.topK ?? Infinity, documents) });
  const res = await postJson(target, "/rerank", body, opts, "the rerank provider");
  const parsed = RerankAnswerSchema.safeParse(res.json);
  const list = parsed.success ? (parsed.data.results ?? parsed.data.data) : undefined;
  // An empty list beside an error ranks nothing: the error is the answer, not an empty ranking.
  if (!list?.length) {
    const failed = errorAnswer(res.json, "the rerank provider");
    if (failed) throw failed;
  }
  if (!list) throw new UpstreamError("invalid_response", `the rerank provider's answer is not ${EXPECTED}`, res.status);
  // One result per document: a provider listing one twice keeps its best score.
  const best = new Map<number, number>();
  list.forEach((entry, at) => {
    const { index, score } = ranked(entry, at, documents, res.status);
    if (score >= (best.get(index) ?? -Infinity)) best.set(index, score);
  });
  const results = [...best]
    .map(([index, score]) => ({ index, score }))
    .sort((a, b) => b.score - a.score)
    .slice(0, input.topK ?? documents);
  return { results, usage: parsed.data?.usage ?? null };
}
