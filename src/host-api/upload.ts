import type { Config } from "../env";
import type { ActionContext } from "./actions/index";
import type { ApiErrorCode } from "../protocol/errors";
import { decisionScope, logDecision } from "./decision-log";
import { ApiError } from "./errors";
import { auditDenial, checkDeadline, checkGranted, errorReply, type HostApiReply } from "./handle";

/**
 * What the Worker needs to store an `artifact.upload` for a run whose token
 * its owning Durable Object accepted. The bytes never pass through the DO:
 * the Worker streams them from the request straight to R2.
 */
export interface UploadGrant {
  runId: string;
  runnerId: string;
  conversationKey: string;
  conversationId: string | null;
  /** The body's declared length; null for a body sent without one (chunked). */
  length: number | null;
  /** The most the body may hold: its declared length, or for a chunked body what this upload reserved of the budget so far (changeUploadBudget adds to it). */
  maxBytes: number;
  /** The upload ends with its run's deadline. */
  deadlineAt: number;
}

/** What the run has already spent of its upload budget; the authorisation takes from it. */
export interface UploadBudget {
  uploadedBytes: number;
}

export type UploadAuthorization = { ok: true; grant: UploadGrant } | { ok: false; reply: HostApiReply };

/**
 * An upload request as the Worker read it: the body's declared length (null
 * when it has none) and, when its query is invalid, the refusal it earned,
 * answered only once the token has been accepted (§8: token before payload).
 */
export interface UploadRequest {
  length: number | null;
  refused?: { code: ApiErrorCode; message: string };
}

/**
 * The same checks as any Host API call (§8 order: granted, payload,
 * deadline), every decision logged and denials audited: the query, then the
 * declared length against the per-upload cap and what is left of the run's
 * budget, which an accepted upload holds until it ends: what it did not
 * store (a body that never arrived whole) is then given back.
 */
export async function authorizeUpload(ctx: Pick<ActionContext, "db" | "snapshot" | "config" | "ledger" | "denials">, request: UploadRequest, budget: UploadBudget): Promise<UploadAuthorization> {
  const s = ctx.snapshot;
  const decided = (outcome: string, status: number) =>
    logDecision({ run_id: s.runId, runner_id: s.runnerId, action: "artifact.upload", resource: {}, scope: decisionScope(s), outcome, status });
  const { length } = request;
  try {
    checkGranted(ctx, "artifact.upload");
    if (request.refused) throw new ApiError(request.refused.code, request.refused.message);
    checkLength(ctx.config, length, budget);
    checkDeadline(ctx);
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    if (err.code === "unauthorized") await auditDenial(ctx, "artifact.upload", err);
    decided(err.code, err.status);
    return { ok: false, reply: errorReply(err) };
  }
  // A body without a length takes the budget a step at a time as it arrives (changeUploadBudget), so uploads at once
  // hold what they store, not each the most it could take; the Worker gives back what it did not use.
  const maxBytes = length ?? Math.min(CHUNKED_UPLOAD_STEP_BYTES, ctx.config.ARTIFACT_UPLOAD_MAX_BYTES, ctx.config.ARTIFACT_UPLOAD_RUN_MAX_BYTES - budget.uploadedBytes);
  budget.uploadedBytes += maxBytes;
  decided("allowed", 200);
  return { ok: true, grant: { runId: s.runId, runnerId: s.runnerId, conversationKey: s.conversationKey, conversationId: s.conversationId, length, maxBytes, deadlineAt: s.deadlineAt } };
}

/** What a chunked upload takes of its run's budget at a time: one R2 part, the most it holds in memory anyway. */
export const CHUNKED_UPLOAD_STEP_BYTES = 5 * 1024 * 1024;

/**
 * An upload's share of its run's budget: `change` > 0 asks for that much more as a chunked body arrives, granted as far
 * as it fits in ARTIFACT_UPLOAD_MAX_BYTES (the upload holds `held`) and in what is left of the run's (0 when nothing
 * fits; null when the run is over), and < 0 gives back what an upload did not store.
 */
export function changeUploadBudget(config: Config, budget: UploadBudget | undefined, held: number, change: number): number | null {
  if (change <= 0) {
    if (budget) budget.uploadedBytes = Math.max(0, budget.uploadedBytes + change);
    return 0;
  }
  if (!budget) return null;
  const granted = Math.max(0, Math.min(change, config.ARTIFACT_UPLOAD_MAX_BYTES - held, config.ARTIFACT_UPLOAD_RUN_MAX_BYTES - budget.uploadedBytes));
  budget.uploadedBytes += granted;
  return granted;
}

function checkLength(config: Config, length: number | null, budget: UploadBudget): void {
  if (length === null) {
    if (budget.uploadedBytes >= config.ARTIFACT_UPLOAD_RUN_MAX_BYTES) throw new ApiError("payload_too_large", `nothing is left of this run's ARTIFACT_UPLOAD_RUN_MAX_BYTES (${config.ARTIFACT_UPLOAD_RUN_MAX_BYTES})`);
    return;
  }
  if (length > config.ARTIFACT_UPLOAD_MAX_BYTES) {
    throw new ApiError("payload_too_large", `upload of ${length} bytes exceeds ARTIFACT_UPLOAD_MAX_BYTES (${config.ARTIFACT_UPLOAD_MAX_BYTES})`);
  }
  if (budget.uploadedBytes + length > config.ARTIFACT_UPLOAD_RUN_MAX_BYTES) {
    const left = config.ARTIFACT_UPLOAD_RUN_MAX_BYTES - budget.uploadedBytes;
    throw new ApiError("payload_too_large", `upload of ${length} bytes exceeds what is left of this run's ARTIFACT_UPLOAD_RUN_MAX_BYTES (${left} of ${config.ARTIFACT_UPLOAD_RUN_MAX_BYTES})`);
  }
}
