import type { Db } from "../db/client";
import type { Config } from "../env";
import { base64ToBytes } from "../lib/base64";
import { parseJson } from "../lib/json";
import { storeInputAttachments, type InputAttachmentSource } from "../artifacts/input";
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
 * The event's input with its attachments stored, and the artifact rows for
 * the ingress batch. A repeat of an event already recorded gets the input as
 * first recorded and stores nothing again (no re-download, no new blobs).
 */
export async function inputWithAttachments(
  deps: { db: Db; bucket: R2Bucket; config: Config },
  event: { eventId: string; clientChosenId: boolean; conversationKey: string; conversationId: string; input: InputContext },
  sources: InputAttachmentSource[],
): Promise<{ input: InputContext; artifactRows: ArtifactRow[] }> {
  if (sources.length === 0) return { input: event.input, artifactRows: [] };
  const earlier = event.clientChosenId ? await eventLogStore(deps.db).get(event.eventId) : undefined;
  if (earlier) return { input: parseJson<InputContext>(earlier.inputJson, event.input), artifactRows: [] };
  const stored = await storeInputAttachments(deps, event, sources);
  return { input: { ...event.input, attachments: [...event.input.attachments, ...stored.refs] }, artifactRows: stored.rows };
}
