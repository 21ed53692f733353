import type { Db } from "../db/client";
import type { Config } from "../env";
import { base64ToBytes } from "../lib/base64";
import { parseJson } from "../lib/json";
import { storedKeysOf, storeInputAttachments, type InputAttachmentSource } from "../artifacts/input";
import type { ArtifactRef, ContentElement } from "../protocol/common";
import type { InputContext } from "../protocol/context";
import type { EnvelopeAttachment } from "../protocol/envelope";
import { eventLogStore } from "../stores/event-log";
import type { ArtifactRow } from "../stores/artifacts";

/** An envelope attachment as a storage source (the schema guarantees exactly one origin). */
export function attachmentSourceOf(a: EnvelopeAttachment): InputAttachmentSource {
  if (a.artifact_id) return { kind: "artifact", artifactId: a.artifact_id };
  const meta = { name: a.name, mimeType: a.mime_type, artifactType: a.artifact_type };
  if (a.url) return { kind: "url", url: a.url, ...meta };
  return { kind: "bytes", bytes: base64ToBytes(a.content_base64!), ...meta };
}

/**
 * An API event's attachment sources: its attachments, then each artifact its `contents` name that they do not, so
 * every artifact the event names is checked alike (an unexpired artifact of its own conversation) and attached.
 */
export function attachmentSourcesOf(input: { attachments?: EnvelopeAttachment[] | null; contents?: ContentElement[] | null } | null | undefined): InputAttachmentSource[] {
  const attachments = input?.attachments ?? [];
  const attached = new Set(attachments.flatMap((a) => (a.artifact_id ? [a.artifact_id] : [])));
  const named = new Map<string, string>();
  (input?.contents ?? []).forEach((el, i) => {
    if ("artifact_id" in el && el.artifact_id && !attached.has(el.artifact_id) && !named.has(el.artifact_id)) named.set(el.artifact_id, `input.contents.${i}`);
  });
  return [...attachments.map(attachmentSourceOf), ...[...named].map(([artifactId, namedAt]) => ({ kind: "artifact" as const, artifactId, namedAt }))];
}

/**
 * The event's input with its attachments stored, and the artifact rows for
 * the ingress batch. A repeat of an event already recorded gets the input as
 * first recorded and stores nothing again (no re-download, no new blobs).
 * `optional`: see storeInputAttachments.
 */
export async function inputWithAttachments(
  deps: { db: Db; bucket: R2Bucket; config: Config; fetchDeadlineAt?: number },
  event: { eventId: string; clientChosenId: boolean; conversationKey: string; conversationId: string; input: InputContext },
  sources: InputAttachmentSource[],
  optional = false,
): Promise<{ input: InputContext; artifactRows: ArtifactRow[]; written: string[]; unavailable: string[] }> {
  const none = { artifactRows: [], written: [], unavailable: [] };
  if (sources.length === 0) return { input: event.input, ...none };
  // Blobs this attempt stored already (a chat reply's own files) are its own: removed when the check fails, and
  // handed back as written when the event is recorded already (the duplicate's answer removes them).
  const stored = storedKeysOf(sources);
  const earlier = event.clientChosenId
    ? await eventLogStore(deps.db)
        .get(event.eventId)
        .catch(async (err: unknown) => {
          // Best effort: the database's error is the answer, and the orphan walk takes what this leaves.
          if (stored.length) await deps.bucket.delete(stored).catch(() => undefined);
          throw err;
        })
    : undefined;
  if (earlier) return { input: parseJson<InputContext>(earlier.inputJson, event.input), ...none, written: stored };
  const kept = await storeInputAttachments(deps, event, sources, { optional });
  const input = { ...event.input, contents: withAttachmentElements(event.input, kept.refs), attachments: [...event.input.attachments, ...kept.refs] };
  return { input, artifactRows: kept.rows, written: kept.written, unavailable: kept.unavailable };
}

function contentElementOf(ref: ArtifactRef): ContentElement {
  if (ref.artifact_type === "image") return { type: "image", artifact_id: ref.artifact_id };
  if (ref.artifact_type === "audio") return { type: "audio", artifact_id: ref.artifact_id };
  return { type: "file", artifact_id: ref.artifact_id, name: ref.name ?? undefined };
}

/**
 * The multimodal view (`input.contents`) names every attachment too, so a
 * runner that reads only contents sees the image: the given contents (or the
 * text as one element), then one element per attachment not already in them.
 */
function withAttachmentElements(input: InputContext, refs: ArtifactRef[]): ContentElement[] {
  const base: ContentElement[] = input.contents.length ? input.contents : input.text ? [{ type: "text", text: input.text }] : [];
  const named = new Set(base.flatMap((el) => ("artifact_id" in el && el.artifact_id ? [el.artifact_id] : [])));
  return [...base, ...refs.filter((r) => !named.has(r.artifact_id)).map(contentElementOf)];
}
