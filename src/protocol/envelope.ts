/**
 * The ingress event a client POSTs to `/v1/events` (the host's public HTTP
 * API). The host turns it into EventLog, Transcript and AgentRunContext.event /
 * input. Unlike the context sent to runners, this is outside input, so unknown
 * keys are refused with a clear 400 instead of being dropped silently; free-form
 * extras belong in `data` / `metadata`.
 */
import { z } from "zod";
import {
  ArtifactRefSchema,
  ContentElementSchema,
  EventTypeSchema,
  RecordSchema,
  utf8ByteLength,
} from "./common";

/** Cap on `input.text`, in UTF-8 bytes; larger inputs are attachments. */
export const INPUT_TEXT_MAX_BYTES = 64 * 1024;

// Ids end up in keys, URLs and logs: keep them short and free of separators that need escaping.
const EVENT_ID_PATTERN = /^[A-Za-z0-9._:-]+$/;
const scopedId = z.string().min(1).max(200);

export const EnvelopeActorSchema = z.strictObject({
  actor_type: z.string().min(1).max(64),
  actor_id: scopedId.nullish(),
  actor_name: z.string().max(200).nullish(),
  metadata: RecordSchema.default({}),
});

export const EnvelopeSubjectSchema = z.strictObject({
  subject_type: z.string().min(1).max(64),
  subject_id: scopedId.nullish(),
  data: RecordSchema.default({}),
});

export const EnvelopeInputSchema = z.strictObject({
  text: z
    .string()
    .refine((t) => utf8ByteLength(t) <= INPUT_TEXT_MAX_BYTES, {
      message: `text longer than ${INPUT_TEXT_MAX_BYTES} bytes; send it as an attachment`,
    })
    .nullish(),
  contents: z.array(ContentElementSchema).nullish(),
  attachments: z.array(ArtifactRefSchema).nullish(),
});

export const EventEnvelopeSchema = z.strictObject({
  /** Client-chosen id for idempotency; the host generates one when absent. */
  event_id: scopedId.regex(EVENT_ID_PATTERN, "event_id may only contain A-Z a-z 0-9 . _ : -").nullish(),
  event_type: EventTypeSchema,
  event_time: z.iso.datetime({ offset: true }).nullish(),
  source_event_type: z.string().min(1).max(200).nullish(),
  workspace_id: scopedId.nullish(),
  bot_id: scopedId.nullish(),
  conversation_id: scopedId,
  thread_id: scopedId.nullish(),
  actor: EnvelopeActorSchema,
  subject: EnvelopeSubjectSchema.nullish(),
  input: EnvelopeInputSchema.default({}),
  data: RecordSchema.default({}),
  metadata: RecordSchema.default({}),
});
export type EventEnvelope = z.infer<typeof EventEnvelopeSchema>;
export type EventEnvelopeInput = z.input<typeof EventEnvelopeSchema>;
