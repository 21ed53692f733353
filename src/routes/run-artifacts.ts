import type { Context } from "hono";
import type { ConversationDO } from "../../durable-objects/conversation";
import { RunEndedDuringUploadError, storeUpload, TruncatedUploadError, UploadDeadlineError, UploadTooLargeError } from "../artifacts/upload";
import { dbOf } from "../db/connect";
import { artifactsOf } from "../artifacts/bucket";
import { drainBody } from "../lib/drain";
import { compressedBodyRefusal } from "../lib/content-encoding";
import { configOf } from "../env";
import { ApiError, invalidToken } from "../host-api/errors";
import { hostApiResponse, refuseToken } from "../host-api/handle";
import { hostFault } from "../host-api/errors";
import { bearerToken } from "../middleware/admin-auth";
import { formatZodIssues, mediaTypeOrNull } from "../protocol/common";
import { ArtifactUploadQuerySchema } from "../protocol/host-api";
import type { AppEnv } from "./app-env";
import { loggedError } from "../lib/describe-error";

const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
const fail = (err: ApiError) => json(err.status, err.toBody());

/** A Content-Length we can stream against, or null when absent or malformed. */
function declaredLength(header: string | undefined): number | null {
  if (!header || !/^\d+$/.test(header)) return null;
  const n = Number(header);
  return Number.isSafeInteger(n) ? n : null;
}

/** The query as sent: a value that is not UTF-8 percent-encoding is refused (a reason), never kept altered. */
function strictQuery(url: string): Record<string, string> | string {
  // No prototype: a parameter named `constructor` or `__proto__` is a parameter like any other (refused as unknown).
  const out: Record<string, string> = Object.create(null);
  const search = new URL(url).search.slice(1);
  for (const pair of search ? search.split("&") : []) {
    if (!pair) continue;
    const at = pair.indexOf("=");
    const [k, v] = at < 0 ? [pair, ""] : [pair.slice(0, at), pair.slice(at + 1)];
    try {
      const key = decodeURIComponent(k.replace(/\+/g, " "));
      // Two values for one name: which one the caller meant is not the host's guess.
      if (key in out) return `${key}: given more than once`;
      out[key] = decodeURIComponent(v.replace(/\+/g, " "));
    } catch {
      return `${k}: not UTF-8 percent-encoding`;
    }
  }
  return out;
}

/**
 * The body's own Content-Type, for an upload whose query names none (a client sends the header as any HTTP client
 * does): kept when it is a media type, and not the "some bytes" a client sends for a type it does not know, nor the
 * form encoding Python's urllib and `curl --data-binary` put on any body they are given no type for (raw bytes are
 * never form fields).
 */
function typeOfBody(header: string | undefined): string | undefined {
  const type = mediaTypeOrNull(header?.trim());
  return type && !/^application\/(?:octet-stream|x-www-form-urlencoded)\s*(;|$)/i.test(type) ? type : undefined;
}

/**
 * `PUT /v1/runs/{run_id}/artifacts?name=&mime_type=&artifact_type=` (PROTOCOL §8,
 * artifact.upload). The owning Durable Object checks the run token and the
 * snapshot; this Worker then streams the body to R2, so large uploads never
 * cross the DO. A body without Content-Length (chunked) takes the run's upload
 * budget a part at a time as it arrives; a sized one takes its declared length. What
 * an upload did not store is given back.
 */
export async function uploadArtifact(c: Context<AppEnv>, owner: DurableObjectStub<ConversationDO> | null): Promise<Response> {
  const runId = c.req.param("runId")!;
  // A refused upload's body is drained first, so the client reads the refusal instead of a reset.
  const refuse = async (answer: Response) => (await drainBody(c.req.raw), answer);
  const token = bearerToken(c.req.header("authorization"));
  if (!token || !owner) return refuse(hostApiResponse(refuseToken(runId, undefined, "artifact.upload")));
  const raw = strictQuery(c.req.url);
  const query = ArtifactUploadQuerySchema.safeParse(typeof raw === "string" ? {} : raw);
  const length = declaredLength(c.req.header("content-length"));
  // An invalid query is answered by the DO, after the token: §8 checks the token before the payload.
  // Stored as sent, a compressed body would be the wrong bytes (its sha256 and size those of the compressed form).
  const compressed = compressedBodyRefusal(c.req.raw.headers);
  const refused =
    typeof raw === "string"
      ? { code: "invalid_argument" as const, message: `invalid query: ${raw}` }
      : !query.success
        ? { code: "invalid_argument" as const, message: `invalid query: ${formatZodIssues(query.error)}` }
        : compressed
          ? { code: "invalid_argument" as const, message: compressed }
          : undefined;
  const auth = await owner.authorizeUpload(runId, token, { length, refused });
  if (!auth.ok) return refuse(hostApiResponse(auth.reply));
  // Safe: the DO refuses every request that came with `refused`, so an accepted one has a valid query.
  const options = { ...query.data!, mime_type: query.data!.mime_type ?? typeOfBody(c.req.header("content-type")) };

  // A body still arriving at the run's deadline is cut there.
  const deadline = AbortSignal.timeout(Math.max(0, auth.grant.deadlineAt - Date.now()));
  let stored = 0;
  // What this upload holds of the run's budget: its declared length, or what its chunked body took so far.
  let held = auth.grant.maxBytes;
  try {
    const stillActive = async () => (await owner.refuseHostApiToken(runId, token, "artifact.upload")) === null;
    const more = async (wanted: number) => {
      const granted = await owner.changeUploadBudget(runId, token, held, wanted);
      held += granted ?? 0;
      return granted;
    };
    const metadata = await storeUpload({ db: dbOf(c.env), bucket: artifactsOf(c.env), config: configOf(c.env) }, auth.grant, options, c.req.raw.body, deadline, stillActive, more);
    stored = metadata.size_bytes ?? 0;
    return json(200, { ok: true, data: metadata });
  } catch (err) {
    if (err instanceof UploadDeadlineError) return fail(new ApiError("deadline_exceeded", err.message));
    if (err instanceof TruncatedUploadError) return fail(new ApiError("invalid_argument", err.message));
    if (err instanceof UploadTooLargeError) return fail(new ApiError("payload_too_large", err.message));
    // Refused (and logged) by the owning DO, as any call with a token that no longer holds.
    if (err instanceof RunEndedDuringUploadError) return fail(invalidToken());
    return fail(err instanceof ApiError ? err : hostFault(runId, "artifact.upload", err));
  } finally {
    // What the upload did not store goes back to the run's budget: a chunked body's unused reservation, and a sized
    // body that never arrived whole (its client went away, its run ended). A release that fails costs the run budget
    // it did not use, never the upload's answer.
    const unused = held - stored;
    if (unused > 0) await owner.changeUploadBudget(runId, token, held, -unused).catch((err: Error) => console.error(`run ${runId}: upload budget not released: ${loggedError(err)}`));
  }
}
