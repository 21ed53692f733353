import { bytesToBase64 } from "../lib/base64";
import type { ModelMessage } from "../protocol/common";
import { artifactElements, inlineRefusal, ModelInputError, type ArtifactElement, type InlineArtifact } from "../resources/chat-content";
import { visibleArtifact } from "./actions/artifacts";
import type { ActionContext } from "./actions/context";
import type { AnswerHold } from "./answer-budget";
import { ApiError, denied } from "./errors";

/** Largest artifact (image, file or audio) a model call may name: as large as an input attachment is by default (INPUT_ATTACHMENT_MAX_BYTES). */
export const MODEL_ARTIFACT_MAX_BYTES = 10 * 1024 * 1024;

/** The elements naming each artifact, by id: each is read once, however many name it. */
function byArtifact(elements: readonly ArtifactElement[]): Map<string, ArtifactElement[]> {
  const ids = new Map<string, ArtifactElement[]>();
  for (const el of elements) ids.set(el.artifactId, [...(ids.get(el.artifactId) ?? []), el]);
  return ids;
}

/** The elements the provider's format cannot carry (a file or audio outside a user message): a 400 naming the first. */
function namedElements(messages: readonly ModelMessage[]): ArtifactElement[] {
  try {
    return artifactElements(messages);
  } catch (err) {
    if (err instanceof ModelInputError) throw new ApiError("invalid_argument", err.message, { details: err.details });
    throw err;
  }
}

/**
 * The images, files and audio a model call names by artifact_id (a user's photo, PDF or voice note in
 * `ctx.input.contents`, PROTOCOL §5: binaries travel by reference), by id: a provider cannot fetch the host's
 * artifacts, so they go inline. Read as `artifact.read` reads them: the run's artifact_read API, its conversation's or
 * its own artifacts, unexpired; each element's media type is checked against what its part may carry before any byte
 * is read. Their encoded size, once per element naming them, is taken from the isolate's budget (`hold`) while the
 * call holds them in its request.
 */
export async function artifactInputs(ctx: ActionContext, messages: readonly ModelMessage[], hold: AnswerHold): Promise<Map<string, InlineArtifact>> {
  const inline = new Map<string, InlineArtifact>();
  const budget = ctx.config.RESOURCE_RESPONSE_BUDGET_BYTES;
  const ids = byArtifact(namedElements(messages));
  if (ids.size === 0) return inline;
  if (!ctx.snapshot.availableApis.artifact_read) {
    throw denied("an image, file or audio element named by artifact_id is read from the artifact: artifact_read is not in this run's available_apis", { api: "artifact_read", artifact_id: [...ids.keys()][0] });
  }
  let copies = 0;
  for (const [id, elements] of ids) {
    const row = await visibleArtifact(ctx, id);
    // A data URL needs a media type: one never stored is the RFC 2046 label for unknown bytes.
    const mimeType = (row.mimeType ?? "").split(";")[0].trim().toLowerCase() || "application/octet-stream";
    for (const el of elements) {
      const refusal = inlineRefusal(el, { mimeType, shownType: row.mimeType ?? "unknown" });
      if (refusal) throw new ApiError("invalid_argument", refusal, { details: { element: el.at, artifact_id: id } });
    }
    const tooLarge = (size: number) => new ApiError("payload_too_large", `${elements[0].type} ${id} is ${size} bytes; a model call takes artifacts of at most ${MODEL_ARTIFACT_MAX_BYTES}`, { details: { artifact_id: id } });
    if (row.sizeBytes !== null && row.sizeBytes > MODEL_ARTIFACT_MAX_BYTES) throw tooLarge(row.sizeBytes);
    const object = await ctx.artifacts.get(row.r2Key);
    if (!object) throw new ApiError("not_found", `artifact ${id} has no stored content`);
    if (object.size > MODEL_ARTIFACT_MAX_BYTES) {
      await object.body.cancel().catch(() => {});
      throw tooLarge(object.size);
    }
    try {
      // Its base64 (4/3 of its size) is what the request holds, once per element naming it (the request body repeats it).
      const bytes = Math.ceil(object.size / 3) * 4 * elements.length;
      // More than the whole budget is never held, however long the call waits: refused as too large, not as busy (429).
      if ((copies += bytes) > budget) throw new ApiError("payload_too_large", `the artifacts of this call take ${copies} bytes as sent; a model call holds at most ${budget} (RESOURCE_RESPONSE_BUDGET_BYTES)`, { details: { artifact_id: id } });
      hold.take(bytes);
    } catch (err) {
      await object.body.cancel().catch(() => {});
      throw err;
    }
    inline.set(id, { mimeType, base64: bytesToBase64(new Uint8Array(await object.arrayBuffer())), name: row.name });
  }
  return inline;
}
