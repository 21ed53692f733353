import { sha256Hex } from "../lib/crypto";
import type { EventEnvelope } from "../protocol/envelope";
// A field of the envelope's own structure sent as null is one left out (not in its free-form bags, where null is a value).
import { withoutNulls } from "../platforms/payload";

/** JSON with every object's keys in order: one text for one value, however its sender ordered the keys. */
function sortedJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(sortedJson).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined);
    return `{${entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => `${JSON.stringify(k)}:${sortedJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/**
 * An attachment as what it names: a URL without its query and fragment, where a presigned URL carries the signature
 * and expiry a client signs anew for each attempt (a repeat fetches nothing: its first attempt's file is the one kept).
 * Cut at the first `?` or `#`, which in a valid URL can only begin them, so a URL without either is digested as sent.
 */
function attachmentAsNamed(a: Record<string, unknown>): Record<string, unknown> {
  return typeof a.url === "string" ? { ...a, url: a.url.replace(/[?#][\s\S]*$/, "") } : a;
}

/**
 * What an API event says, as a digest kept on its EventLog row: a repeat of its `event_id` is answered `duplicate`
 * only when it says the same. A field left out and one sent as null are the same (README), and so are two key orders;
 * `event_time` is left out, as a client that stamps each attempt when it sends it is still retrying one event, and so
 * is an attachment URL's query (attachmentAsNamed).
 */
export function eventFingerprint(e: EventEnvelope): Promise<string> {
  const input = e.input ?? {};
  return sha256Hex(
    sortedJson({
      v: 1,
      event_type: e.event_type,
      source_event_type: e.source_event_type ?? null,
      workspace_id: e.workspace_id ?? null,
      bot_id: e.bot_id ?? null,
      conversation_id: e.conversation_id,
      thread_id: e.thread_id ?? null,
      actor: { actor_type: e.actor.actor_type, actor_id: e.actor.actor_id ?? null, actor_name: e.actor.actor_name ?? null, metadata: e.actor.metadata ?? {} },
      subject: e.subject ? { subject_type: e.subject.subject_type, subject_id: e.subject.subject_id ?? null, data: e.subject.data ?? {} } : null,
      input: { text: input.text ?? null, contents: withoutNulls(input.contents ?? []), attachments: withoutNulls<Record<string, unknown>[]>(input.attachments ?? []).map(attachmentAsNamed) },
      data: e.data ?? {},
      metadata: e.metadata ?? {},
    }),
  );
}
