import * as z from "zod";
import { configOf, type Env } from "../env";
import { ownerOf } from "../run/owner";
import { notFound } from "../lib/errors";
import { decodeCursor, decodeTimeIdCursor, encodeCursor, encodeTimeIdCursor } from "../lib/cursor";
import { adminAuth, bearerToken } from "../middleware/admin-auth";
import { noBody, validate } from "../middleware/validate";
import { hostApiResponse, refuseToken, type HostApiBody } from "../host-api/handle";
import { readCapped } from "../artifacts/read-capped";
import { drainBody } from "../lib/drain";
import { compressedBodyRefusal } from "../lib/content-encoding";
import { ADMIN_BODY_MAX_BYTES, boundLength, limitBody } from "../middleware/body-limit";
import { dbOf } from "../db/connect";
import { ENDED, runsStore, settledPrefix, toLedgerView, toRunView } from "../stores/runs";
import type { Context } from "hono";
import { decodeOr400, router, type AppEnv } from "./app-env";
import { uploadArtifact } from "./run-artifacts";
import { MAX_FOLLOWERS_PER_RUN } from "../run/live";
import { END_FRAME_ID } from "../run/sse-frames";
import { pageCursor, pageLimit } from "./query";
import { inHostApiShape, methodNotAllowed } from "../middleware/on-error";

/**
 * A streamed answer from the run's object (a model stream, a follower's SSE) crosses an RPC pipe whose
 * far end just stops reading when the client goes away: the object never hears of it. This Worker does
 * (`Request.signal`, flag `enable_request_signal`) and tells it, so it stops the stream and what feeds it.
 */
function closeWhenReaderGone(c: Context<AppEnv>, owner: NonNullable<ReturnType<typeof ownerOf>>, runId: string, streamId: string) {
  const gone = () => c.executionCtx.waitUntil(owner.readerGone(runId, streamId));
  // Gone already while the follower was being set up: an abort listener added now would never fire.
  if (c.req.raw.signal.aborted) gone();
  else c.req.raw.signal.addEventListener("abort", gone, { once: true });
}

async function existingRun(env: Env, runId: string) {
  const row = await runsStore(dbOf(env)).get(runId);
  if (!row) throw notFound(`run ${runId} not found`);
  return row;
}

const RunParam = z.object({ runId: z.string().min(1).max(200) });
const FrameId = z.string().regex(new RegExp(`^(\\d{1,15}|${END_FRAME_ID})$`), "Last-Event-ID must be a frame id this stream sent");
const StreamHeaders = z.object({ "last-event-id": FrameId.optional() });
/** `lastEventId` is where EventSource polyfills put Last-Event-ID on reconnect; any other parameter is a 400, not a replay from the start. */
const StreamQuery = z.strictObject({ lastEventId: FrameId.optional() });
const LedgerQuery = z.strictObject({ cursor: pageCursor.optional(), limit: pageLimit(1000, 100) });
const ListQuery = z.strictObject({
  conversation_id: z.string().min(1).max(200).optional(),
  thread_id: z.string().min(1).max(200).optional(),
  workspace_id: z.string().min(1).max(200).optional(),
  bot_id: z.string().min(1).max(200).optional(),
  agent_id: z.string().min(1).max(200).optional(),
  status: z.enum(["created", "running", "completed", "failed", "cancelled", "timeout"]).optional(),
  limit: pageLimit(200, 50),
  cursor: pageCursor.optional(),
});
const RUN_LIST_CURSOR = "runs";
// Unbuffered end to end: nginx (a self-hosted proxy in front of workerd) holds a response back unless told not to.
const SSE_HEADERS = { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", "x-accel-buffering": "no" };

/**
 * Bodies up to this size are read before the owning DO checks the token: a
 * second round trip would cost every ordinary call more than reading them
 * does. A larger or undeclared body is read only once its token is accepted,
 * so an anonymous caller never makes the host hold more than this.
 */
const UNAUTHENTICATED_READ_BYTES = 64 * 1024;

/** The body, read no further than the cap; what is wrong with it is judged after the token (§8). */
async function readHostApiBody(request: Request, maxBytes: number): Promise<HostApiBody> {
  // §8 has no 415: a body the host would misread is an invalid argument, answered (after the token) with what to do.
  const compressed = compressedBodyRefusal(request.headers);
  if (compressed) return (await drainBody(request), { refused: { code: "invalid_argument", message: compressed } });
  const declaredTooLarge = Number(request.headers.get("content-length") ?? NaN) > maxBytes;
  // Declared too large: drained unread, so the client gets its answer rather than a reset.
  const bytes = declaredTooLarge ? (await drainBody(request), "too_large" as const) : await readCapped(request, maxBytes, { drainOverflow: true });
  if (bytes === "too_large") return { refused: { code: "payload_too_large", message: `request body exceeds ${maxBytes} bytes` } };
  // Parsed by the DO: text crosses the RPC boundary cheaply, and hostile nesting is refused there, not by a clone.
  try {
    // Fatal: bytes that are not UTF-8 are refused (after the token check, in the DO), never stored with U+FFFD in their place.
    return { text: new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes) };
  } catch {
    return { refused: { code: "invalid_argument", message: "request body is not valid UTF-8" } };
  }
}

/** A Host API call (PROTOCOL §8), authenticated by the run token, not the admin token, and handed to the run's DO. */
async function hostApiCall(c: Context<AppEnv>, runId: string): Promise<Response> {
  const token = bearerToken(c.req.header("authorization"));
  const owner = ownerOf(c.env, runId);
  if (!token || !owner) {
    // Refused unread, as a wrong token is: drained, so the client reads the 401 instead of a reset.
    await drainBody(c.req.raw);
    return hostApiResponse(refuseToken(runId, undefined));
  }
  // Only a length the body is held to counts: a small Content-Length beside Transfer-Encoding bounds nothing.
  const length = boundLength(c.req.raw);
  if (!(length !== null && length <= UNAUTHENTICATED_READ_BYTES)) {
    const refusal = await owner.refuseHostApiToken(runId, token);
    // Drained, not buffered, so the client reads its answer instead of a reset.
    if (refusal) return (await drainBody(c.req.raw), hostApiResponse(refusal));
  }
  const reply = await owner.hostApi(runId, token, await readHostApiBody(c.req.raw, configOf(c.env).MAX_API_BODY_BYTES));
  if (reply.streamId) closeWhenReaderGone(c, owner, runId, reply.streamId);
  return hostApiResponse(reply);
}

export const runsRouter = router()
  // The run-token routes answer in §8's shape, also when the call into the run's DO throws (inHostApiShape).
  .post("/:runId/api", inHostApiShape(null, hostApiCall))
  // artifact.upload: run token checked by the owning DO, body streamed to R2 (run-artifacts.ts).
  .put("/:runId/artifacts", inHostApiShape("artifact.upload", (c, runId) => uploadArtifact(c, ownerOf(c.env, runId))))
  // Each run-token route takes one method: another gets a 405 naming it, not the admin 401 a runner author would misread.
  .all("/:runId/api", methodNotAllowed("POST"))
  .all("/:runId/artifacts", methodNotAllowed("PUT"))
  // Capped as /v1/admin's bodies are: the cancel reads its (empty) body, which would otherwise be held whole.
  .use("*", adminAuth(), limitBody(ADMIN_BODY_MAX_BYTES))
  .get("/", validate("query", ListQuery), async (c) => {
    const q = c.req.valid("query");
    const before = q.cursor ? decodeOr400(() => decodeTimeIdCursor(RUN_LIST_CURSOR, q.cursor!)) : undefined;
    const { rows, hasMore } = await runsStore(dbOf(c.env)).list({ conversationId: q.conversation_id, threadId: q.thread_id, workspaceId: q.workspace_id, botId: q.bot_id, agentId: q.agent_id, status: q.status, before, limit: q.limit });
    const last = rows[rows.length - 1];
    const nextCursor = hasMore && last ? encodeTimeIdCursor(RUN_LIST_CURSOR, { time: last.createdAt, id: last.runId }) : undefined;
    return c.json({ items: rows.map(toRunView), next_cursor: nextCursor, has_more: hasMore });
  })
  .get("/:runId", validate("param", RunParam), async (c) => c.json(toRunView(await existingRun(c.env, c.req.valid("param").runId))))
  .get("/:runId/events", validate("param", RunParam), validate("query", LedgerQuery), async (c) => {
    const { runId } = c.req.valid("param");
    const q = c.req.valid("query");
    // The status is read before the page: a run that ends in between is still treated as live, the safe side.
    const row = await existingRun(c.env, runId);
    const after = q.cursor ? decodeOr400(() => decodeCursor("r", q.cursor!, runId)) : 0;
    const page = await runsStore(dbOf(c.env)).ledger(runId, after, q.limit);
    const ended = (ENDED as readonly string[]).includes(row.status);
    const rows = ended ? page.rows : settledPrefix(page.rows, after);
    const items = rows.map(toLedgerView);
    // The position after this page, even when it is the last one for now: a
    // client following a running run polls from it until run_status is terminal.
    const nextCursor = items.length ? items[items.length - 1].cursor : encodeCursor("r", after, runId);
    return c.json({ items, next_cursor: nextCursor, has_more: page.hasMore && rows.length === page.rows.length, run_status: toRunView(row).status });
  })
  .get("/:runId/stream", validate("param", RunParam), validate("query", StreamQuery), validate("header", StreamHeaders), async (c) => {
    const { runId } = c.req.valid("param");
    // A reconnecting EventSource names the last frame it had (frames carry `id: {seq}`): it gets only what follows.
    const lastEventId = c.req.valid("header")["last-event-id"] ?? c.req.valid("query").lastEventId;
    // It had the end: there is nothing more, and any 200 would have it reconnect again, forever. 204 stops an EventSource.
    if (lastEventId === END_FRAME_ID) {
      await existingRun(c.env, runId);
      return c.body(null, 204);
    }
    const after = Number(lastEventId ?? 0);
    // HEAD (curl -I, a link checker) reads no body: a follower made for it would hold one of the run's slots with
    // nothing ever to write to it or see its reader go. The headers only, and no follower.
    if (c.req.method === "HEAD") {
      await existingRun(c.env, runId);
      return new Response(null, { headers: SSE_HEADERS });
    }
    const owner = ownerOf(c.env, runId);
    const follower = await owner?.subscribe(runId, after);
    if (!owner || !follower) throw notFound(`run ${runId} not found`);
    if (follower === "full") return c.json({ error: { code: "rate_limited", message: `run ${runId} has ${MAX_FOLLOWERS_PER_RUN} followers already: close one, or follow GET /v1/runs/${runId}/events`, details: { limit: MAX_FOLLOWERS_PER_RUN } } }, 429);
    closeWhenReaderGone(c, owner, runId, follower.streamId);
    return new Response(follower.stream, { headers: SSE_HEADERS });
  })
  .post("/:runId/cancel", validate("param", RunParam), noBody(), async (c) => {
    const { runId } = c.req.valid("param");
    await existingRun(c.env, runId);
    const owner = ownerOf(c.env, runId);
    const outcome = owner ? await owner.cancel(runId) : { cancelled: false as const };
    // `cancelled`: it had not started, its end is recorded (GET shows it); `cancelling`: an active run, ending as its abort lands.
    if (outcome.cancelled) return c.json({ run_id: runId, cancelled: true, status: outcome.status }, 202);
    // The usual error shape, with the run's status beside it; a run discarded meanwhile (its event steered into another run, or rejected) is a 404.
    const latest = (await existingRun(c.env, runId)).status;
    return c.json({ error: { code: "conflict", message: `run ${runId} has already ended (${latest}): there is nothing to cancel` }, run_id: runId, cancelled: false, status: latest }, 409);
  });
