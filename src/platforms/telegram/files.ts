/** The files a Telegram message carries (its own, or those of the message it replies to), before they are downloaded. */
import * as z from "zod";
import { artifactTypeOf } from "../../artifacts/policy";
import type { PlatformFile } from "../types";

const FileSchema = z.looseObject({ file_id: z.string().min(1), file_unique_id: z.string().min(1).optional(), file_name: z.string().optional(), mime_type: z.string().optional() });

/** A message's file fields, as MessageSchema and a replied message's schema both read them. */
export const FileFieldsSchema = z.looseObject({
  photo: z.array(FileSchema).optional(),
  document: FileSchema.optional(),
  voice: FileSchema.optional(),
  audio: FileSchema.optional(),
  video: FileSchema.optional(),
  /** A round video message, recorded like a voice message: always MP4. */
  video_note: FileSchema.optional(),
});

/** The file's lasting id, the same for every bot and over time: an edit naming another has replaced the file. */
const uniqueOf = (f: z.infer<typeof FileSchema>) => (f.file_unique_id === undefined ? {} : { uniqueId: f.file_unique_id });

export function filesOf(m: z.infer<typeof FileFieldsSchema>): PlatformFile[] {
  const files: PlatformFile[] = [];
  // Telegram sends every size of a photo; the last is the largest.
  const photo = m.photo?.at(-1);
  if (photo) files.push({ ref: photo.file_id, ...uniqueOf(photo), artifactType: "image", mimeType: "image/jpeg" });
  if (m.document) files.push({ ref: m.document.file_id, ...uniqueOf(m.document), name: m.document.file_name, mimeType: m.document.mime_type, artifactType: artifactTypeOf(m.document.mime_type) as PlatformFile["artifactType"] });
  if (m.voice) files.push({ ref: m.voice.file_id, ...uniqueOf(m.voice), mimeType: m.voice.mime_type ?? "audio/ogg", artifactType: "audio" });
  if (m.audio) files.push({ ref: m.audio.file_id, ...uniqueOf(m.audio), name: m.audio.file_name, mimeType: m.audio.mime_type, artifactType: "audio" });
  if (m.video) files.push({ ref: m.video.file_id, ...uniqueOf(m.video), name: m.video.file_name, mimeType: m.video.mime_type, artifactType: "video" });
  if (m.video_note) files.push({ ref: m.video_note.file_id, ...uniqueOf(m.video_note), mimeType: "video/mp4", artifactType: "video" });
  return files;
}
