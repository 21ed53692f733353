import type { ActionContext } from "./actions/index";
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
}

export type UploadAuthorization = { ok: true; grant: UploadGrant } | { ok: false; reply: HostApiReply };

/** The same checks as any Host API call (§8 order: granted, deadline), denials audited. */
export async function authorizeUpload(ctx: Pick<ActionContext, "db" | "snapshot">): Promise<UploadAuthorization> {
  try {
    checkGranted(ctx, "artifact.upload");
    checkDeadline(ctx);
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    if (err.code === "unauthorized") await auditDenial(ctx, "artifact.upload", err);
    return { ok: false, reply: errorReply(err) };
  }
  const s = ctx.snapshot;
  return { ok: true, grant: { runId: s.runId, runnerId: s.runnerId, conversationKey: s.conversationKey, conversationId: s.conversationId } };
}
