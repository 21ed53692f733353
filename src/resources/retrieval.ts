import * as z from "zod";
import { RecordSchema } from "../protocol/common";
import { attemptSignal, httpError, readJson, upstreamFetch, UpstreamError } from "./upstream";

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
  opts: { signal: AbortSignal; maxBytes: number; attemptTimeoutMs: number },
): Promise<RetrievedEntry[]> {
  const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json" };
  if (target.apiKey) headers.authorization = `Bearer ${target.apiKey}`;
  const body = JSON.stringify({ query: input.query, top_k: input.topK, filters: input.filters ?? {} });
  // The endpoint must answer (headers) within the attempt timeout; the body is then bounded by the call's signal only.
  const attempt = attemptSignal(opts.signal, opts.attemptTimeoutMs, "the retrieval endpoint");
  let res: Response;
  try {
    res = await upstreamFetch(target.endpoint, { method: "POST", headers, body, signal: attempt.signal });
    attempt.answered();
  } catch (err) {
    attempt.dispose();
    throw err;
  }
  if (!res.ok) throw await httpError(res, "the retrieval endpoint", opts.signal);
  const parsed = EntriesSchema.safeParse(await readJson(res, opts.maxBytes, opts.signal, "the retrieval endpoint"));
  if (!parsed.success) throw new UpstreamError("invalid_response", "the retrieval endpoint's answer is not {entries: [{content, score}]}", res.status);
  return parsed.data.entries
    .map((e) => ({ content: e.content, score: e.score, metadata: e.metadata ?? {} }))
    .sort((a, b) => b.score - a.score)
    .slice(0, input.topK);
}
