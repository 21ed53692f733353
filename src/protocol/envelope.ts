/**
 * The ingress event a client POSTs to `/v1/events` (the host's public HTTP
 * API). The host turns it into EventLog, Transcript and AgentRunContext.event /
 * input. Unlike the context sent to runners, this is outside input, so unknown
 * keys are refused with a clear 400 instead of being dropped silently; free-form
 * extras belong in `data` / `metadata`.
 */
import * as z from "zod";
import {
  labelSchema,
  MediaTypeSchema,
  MessageTextSchema,
  nulFreeText,
  ContentElementSchema,
  EventTypeSchema,
  orDefault,
  RecordSchema,
  ScopedIdSchema,
  utf8ByteLength,
} from "./common";

/** Cap on `input.text`, in UTF-8 bytes; larger inputs are attachments. */
export const INPUT_TEXT_MAX_BYTES = 64 * 1024;

// Ids end up in keys, URLs and logs: keep them short and free of separators that need escaping.
const EVENT_ID_PATTERN = /^[A-Za-z0-9._:-]+$/;
// "." and ".." are path segments every URL parser removes: GET /v1/events/{event_id} could never name them.
const DOT_SEGMENT = /^\.{1,2}$/;

export const EnvelopeActorSchema = z.strictObject({
  actor_type: nulFreeText().min(1).max(64),
  actor_id: ScopedIdSchema.nullish(),
  actor_name: nulFreeText().max(200).nullish(),
  metadata: orDefault(RecordSchema, {}),
});

export const EnvelopeSubjectSchema = z.strictObject({
  subject_type: nulFreeText().min(1).max(64),
  subject_id: ScopedIdSchema.nullish(),
  data: orDefault(RecordSchema, {}),
});

/** At most this many attachments per event: ingress work stays bounded. */
export const INPUT_ATTACHMENTS_MAX = 16;

/**
 * A binary input. The host stores it in R2 as an artifact before the run and
 * the runner receives only a reference: give the bytes (`content_base64`), a
 * URL the host fetches (`url`), or an artifact this conversation already has
 * (`artifact_id`, whose stored name/type win). Size caps are configuration
 * (INPUT_ATTACHMENT_MAX_BYTES; inline bytes also count toward MAX_EVENT_BODY_BYTES).
 */
export const EnvelopeAttachmentSchema = z
  .strictObject({
    content_base64: z.base64().min(1).nullish(),
    url: z.url({ protocol: /^https?$/ }).nullish(),
    artifact_id: z.string().min(1).max(200).nullish(),
    name: labelSchema(255).nullish(),
    mime_type: MediaTypeSchema.nullish(),
    artifact_type: labelSchema(64).nullish(),
  })
  .refine((a) => [a.content_base64, a.url, a.artifact_id].filter(Boolean).length === 1, {
    message: "give exactly one of content_base64, url or artifact_id",
  });
export type EnvelopeAttachment = z.infer<typeof EnvelopeAttachmentSchema>;

export const EnvelopeInputSchema = z.strictObject({
  text: MessageTextSchema.refine((t) => utf8ByteLength(t) <= INPUT_TEXT_MAX_BYTES, {
      message: `text longer than ${INPUT_TEXT_MAX_BYTES} bytes; send it as an attachment`,
    })
    .nullish(),
  contents: z.array(ContentElementSchema).nullish(),
  attachments: z.array(EnvelopeAttachmentSchema).max(INPUT_ATTACHMENTS_MAX).nullish(),
});

export const EventEnvelopeSchema = z.strictObject({
  /** Client-chosen id for idempotency; the host generates one when absent. */
  event_id: ScopedIdSchema.regex(EVENT_ID_PATTERN, "event_id may only contain A-Z a-z 0-9 . _ : -")
    .refine((id) => !DOT_SEGMENT.test(id), "event_id must not be \".\" or \"..\"")
    .nullish(),
  event_type: EventTypeSchema,
  event_time: z.iso.datetime({ offset: true }).nullish(),
  source_event_type: nulFreeText().min(1).max(200).nullish(),
  workspace_id: ScopedIdSchema.nullish(),
  bot_id: ScopedIdSchema.nullish(),
  conversation_id: ScopedIdSchema,
  thread_id: ScopedIdSchema.nullish(),
  actor: EnvelopeActorSchema,
  subject: EnvelopeSubjectSchema.nullish(),
  input: orDefault(EnvelopeInputSchema, {}),
  data: orDefault(RecordSchema, {}),
  metadata: orDefault(RecordSchema, {}),
});
export type EventEnvelope = z.infer<typeof EventEnvelopeSchema>;
export type EventEnvelopeInput = z.input<typeof EventEnvelopeSchema>;
