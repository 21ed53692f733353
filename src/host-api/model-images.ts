import { bytesToBase64 } from "../lib/base64";
import type { ModelMessage } from "../protocol/common";
import { visibleArtifact } from "./actions/artifacts";
import type { ActionContext } from "./actions/context";
import type { AnswerHold } from "./answer-budget";
import { ApiError, denied } from "./errors";

/** Largest image a model call may name by artifact_id: as large as an input attachment is by default (INPUT_ATTACHMENT_MAX_BYTES). */
export const MODEL_IMAGE_MAX_BYTES = 10 * 1024 * 1024;

/** The artifact ids of the image elements in `messages` that name no url, with how many elements name each. */
function imageArtifactIds(messages: readonly ModelMessage[]): Map<string, number> {
  const ids = new Map<string, number>();
  for (const message of messages) {
    if (!Array.isArray(message.content)) continue;
    for (const el of message.content) if (el.type === "image" && !el.url && el.artifact_id) ids.set(el.artifact_id, (ids.get(el.artifact_id) ?? 0) + 1);
  }
  return ids;
}

/**
 * The images a model call names by artifact_id (a user's photo in `ctx.input.contents`, PROTOCOL §5: binaries travel
 * by reference), as data URLs by id: a provider cannot fetch the host's artifacts, so they go inline. Read as
 * `artifact.read` reads them: the run's artifact_read API, its conversation's or its own artifacts, unexpired. Their
 * encoded size, once per element naming them, is taken from the isolate's budget (`hold`) while the call holds them
 * in its request.
 */
export async function artifactImages(ctx: ActionContext, messages: readonly ModelMessage[], hold: AnswerHold): Promise<Map<string, string>> {
  const images = new Map<string, string>();
  const budget = ctx.config.RESOURCE_RESPONSE_BUDGET_BYTES;
  const ids = imageArtifactIds(messages);
  if (ids.size === 0) return images;
  if (!ctx.snapshot.availableApis.artifact_read) {
    throw denied("an image named by artifact_id is read from the artifact: artifact_read is not in this run's available_apis", { api: "artifact_read", artifact_id: [...ids.keys()][0] });
  }
  let copies = 0;
  for (const [id, count] of ids) {
    const row = await visibleArtifact(ctx, id);
    const mimeType = (row.mimeType ?? "").split(";")[0].trim().toLowerCase();
    if (!mimeType.startsWith("image/")) throw new ApiError("invalid_argument", `artifact ${id} is not an image (mime_type ${row.mimeType ?? "unknown"})`, { details: { artifact_id: id } });
    const tooLarge = (size: number) => new ApiError("payload_too_large", `image ${id} is ${size} bytes; a model call takes images of at most ${MODEL_IMAGE_MAX_BYTES}`, { details: { artifact_id: id } });
    if (row.sizeBytes !== null && row.sizeBytes > MODEL_IMAGE_MAX_BYTES) throw tooLarge(row.sizeBytes);
    const object = await ctx.artifacts.get(row.r2Key);
    if (!object) throw new ApiError("not_found", `artifact ${id} has no stored content`);
    if (object.size > MODEL_IMAGE_MAX_BYTES) {
      await object.body.cancel().catch(() => {});
      throw tooLarge(object.size);
    }
    try {
      // Its base64 (4/3 of its size) is what the request holds, once per element naming it (the request body repeats it).
      const bytes = Math.ceil(object.size / 3) * 4 * count;
      // More than the whole budget is never held, however long the call waits: refused as too large, not as busy (429).
      if ((copies += bytes) > budget) throw new ApiError("payload_too_large", `the images of this call take ${copies} bytes as sent; a model call holds at most ${budget} (RESOURCE_RESPONSE_BUDGET_BYTES)`, { details: { artifact_id: id } });
      hold.take(bytes);
    } catch (err) {
      await object.body.cancel().catch(() => {});
      throw err;
    }
    images.set(id, `data:${mimeType};base64,${bytesToBase64(new Uint8Array(await object.arrayBuffer()))}`);
  }
  return images;
}
