import * as z from "zod";
import { RecordSchema } from "../protocol/common";
import { attemptSignal, httpError, readJson, upstreamFetch, UpstreamError, type TakeBytes } from "./upstream";

export interface RetrievalTarget {
  endpoint: string;
  apiKey: string | null;
}

const EntriesSchema = z.looseObject({
  entries: z.array(z.looseObject({ content: z.string(), score: z.number(), metadata: RecordSchema.nullish() })),
});

export type RetrievedEntry = { content: string; score: number; metadata: Record<string, unknown> };

/**
 * A knowledge base's retrieval endpoint: `POST {endpoint}` with
 * `{query, top_k, filters}` (and `Authorization: Bearer {api_key}` when one is
 * configured) answers `{entries: [{content, score, metadata?}]}`. At most
 * `top_k` entries are kept, best first, whatever the endpoint returns.
 */
export async function retrieve(
  target: RetrievalTarget,
  input: { query: string; topK: number; filters?: Record<string, unknown> | null },
  opts: { signal: AbortSignal; maxBytes: number; attemptTimeoutMs: number; take?: TakeBytes },
): Promise<RetrievedEntry[]> {
  const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json" };
  if (target.apiKey) headers.authorization = `Bearer ${target.apiKey}`;
  const body = JSON.stringify({ query: input.query, top_k: input.topK, filters: input.filters ?? {} });
  // The whole answer, not only its headers, within the attempt timeout: a body that stalls or trickles holds nothing longer.
  const attempt = attemptSignal(opts.signal, opts.attemptTimeoutMs, "the retrieval endpoint");
  let json: unknown;
  let status: number;
  try {
    const res = await upstreamFetch(target.endpoint, { method: "POST", headers, body, signal: attempt.signal });
    if (!res.ok) throw await httpError(res, "the retrieval endpoint", attempt.signal);
    status = res.status;
    json = await readJson(res, opts.maxBytes, attempt.signal, "the retrieval endpoint", opts.take);
  } finally {
    attempt.dispose();
  }
  const parsed = EntriesSchema.safeParse(json);
  if (!parsed.success) throw new UpstreamError("invalid_response", "the retrieval endpoint's answer is not {entries: [{content, score}]}", status);
  return parsed.data.entries
    .map((e) => ({ content: e.content, score: e.score, metadata: e.metadata ?? {} }))
    .sort((a, b) => b.score - a.score)
    .slice(0, input.topK);
}
