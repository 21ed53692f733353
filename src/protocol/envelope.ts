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
  refuseRoundedIntegers,
  textOfElements,
  utf8ByteLength,
} from "./common";
import { PLATFORMS } from "../platforms/types";
import { PRIVATE_AUDIENCE_KEY } from "../platforms/audience";

/** Cap on `input.text`, in UTF-8 bytes; larger inputs are attachments. */
export const INPUT_TEXT_MAX_BYTES = 64 * 1024;

// Ids end up in keys, URLs and logs: keep them short and free of separators that need escaping.
const EVENT_ID_PATTERN = /^[A-Za-z0-9._:-]+$/;
// "." and ".." are path segments every URL parser removes: GET /v1/events/{event_id} could never name them.
const DOT_SEGMENT = /^\.{1,2}$/;
// The host's own event ids: a chat platform's (`{platform}:{bot_id}:{key}`) and its records' (`hev_`). One sent
// through the API would take the id first, and the platform's own event would then be answered as a repeat.
const HOST_EVENT_ID = new RegExp(`^(?:(?:${PLATFORMS.join("|")}):|hev_)`);
/** Event metadata keys the host writes itself (a steering claim, attachments it could not store, why it rejected the event, whose eyes alone a chat event is for): a caller's would forge them. */
const HOST_METADATA_KEYS = ["steering", "attachments_unavailable", "rejection", PRIVATE_AUDIENCE_KEY];
/** A free-form bag kept and passed on as sent: a whole number JSON parsing rounded (a 64-bit id) is refused, never stored altered. */
const ExactRecordSchema = RecordSchema.superRefine(refuseRoundedIntegers);
// Every timestamp the host gives back is ISO 8601 in UTC with a four-digit year.
const inFourDigitYears = (time: string) => {
  const year = new Date(time).getUTCFullYear();
  // Not a time at all: the datetime check says so, alone.
  return Number.isNaN(year) || (year >= 0 && year <= 9999);
};

export const EnvelopeActorSchema = z.strictObject({
  actor_type: nulFreeText().min(1).max(64),
  actor_id: ScopedIdSchema.nullish(),
  actor_name: nulFreeText().max(200).nullish(),
  metadata: orDefault(ExactRecordSchema, {}),
});

export const EnvelopeSubjectSchema = z.strictObject({
  subject_type: nulFreeText().min(1).max(64),
  subject_id: ScopedIdSchema.nullish(),
  data: orDefault(ExactRecordSchema, {}),
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
  contents: z
    .array(ContentElementSchema)
    .refine((els) => utf8ByteLength(textOfElements(els)) <= INPUT_TEXT_MAX_BYTES, {
      message: `text parts longer than ${INPUT_TEXT_MAX_BYTES} bytes together; send it as an attachment`,
    })
    .nullish(),
  attachments: z.array(EnvelopeAttachmentSchema).max(INPUT_ATTACHMENTS_MAX).nullish(),
});

export const EventEnvelopeSchema = z.strictObject({
  /** Client-chosen id for idempotency; the host generates one when absent. */
  event_id: ScopedIdSchema.regex(EVENT_ID_PATTERN, "event_id may only contain A-Z a-z 0-9 . _ : -")
    .refine((id) => !DOT_SEGMENT.test(id), "event_id must not be \".\" or \"..\"")
    .refine((id) => !HOST_EVENT_ID.test(id), `event_id must not begin like the host's own (${PLATFORMS.map((p) => `${p}:`).join(", ")}, hev_)`)
    .nullish(),
  event_type: EventTypeSchema,
  event_time: z.iso.datetime({ offset: true }).refine(inFourDigitYears, "event_time must fall within the years 0000 to 9999 in UTC").nullish(),
  source_event_type: nulFreeText().min(1).max(200).nullish(),
  workspace_id: ScopedIdSchema.nullish(),
  bot_id: ScopedIdSchema.nullish(),
  conversation_id: ScopedIdSchema,
  thread_id: ScopedIdSchema.nullish(),
  actor: EnvelopeActorSchema,
  subject: EnvelopeSubjectSchema.nullish(),
  input: orDefault(EnvelopeInputSchema, {}),
  data: orDefault(ExactRecordSchema, {}),
  metadata: orDefault(
    ExactRecordSchema.refine((m) => !HOST_METADATA_KEYS.some((k) => Object.hasOwn(m, k)), `metadata keys ${HOST_METADATA_KEYS.join(", ")} are written by the host`),
    {},
  ),
});
export type EventEnvelope = z.infer<typeof EventEnvelopeSchema>;
export type EventEnvelopeInput = z.input<typeof EventEnvelopeSchema>;
