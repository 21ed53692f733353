/**
 * The name a file goes to a chat under. Platforms go by the name's extension, not the media type sent with it:
 * Discord shows an image inline only when its name ends in an image extension, and a document saved from Telegram,
 * Slack or Lark opens by its extension. An artifact stored without a name (or named without an extension) would reach
 * the chat as a bare `art_…` the user cannot open, so its media type's extension is added.
 */
import { mediaEssence } from "../platforms/upload";

/** Types whose extension is not their subtype (or whose subtype says nothing a file name could). */
const EXTENSIONS: Record<string, string> = {
  "image/jpeg": "jpg",
  "image/svg+xml": "svg",
  "image/x-icon": "ico",
  "image/vnd.microsoft.icon": "ico",
  "audio/mpeg": "mp3",
  "audio/mp4": "m4a",
  "audio/x-wav": "wav",
  "audio/x-m4a": "m4a",
  "video/quicktime": "mov",
  "video/x-msvideo": "avi",
  "video/x-matroska": "mkv",
  "text/plain": "txt",
  "text/markdown": "md",
  "text/javascript": "js",
  "text/tab-separated-values": "tsv",
  "application/pdf": "pdf",
  "application/json": "json",
  "application/xml": "xml",
  "application/zip": "zip",
  "application/gzip": "gz",
  "application/x-tar": "tar",
  "application/rtf": "rtf",
  "application/epub+zip": "epub",
  "application/msword": "doc",
  "application/vnd.ms-excel": "xls",
  "application/vnd.ms-powerpoint": "ppt",
  "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
  "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
  "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
};

/** The usual extension of a media type, when there is one to give (none for application/octet-stream). */
export function extensionOf(mimeType: string | null): string | null {
  if (!mimeType) return null;
  const essence = mediaEssence(mimeType);
  if (EXTENSIONS[essence]) return EXTENSIONS[essence];
  // image/png, audio/ogg, video/webm, text/csv: the subtype is the extension.
  const [top, sub] = essence.split("/");
  return ["image", "audio", "video", "text"].includes(top) && /^[a-z0-9]{2,5}$/.test(sub ?? "") ? sub : null;
}

/** A name that ends in an extension already (`report.pdf`, `.env`); `v1.2 notes` does not. */
const HAS_EXTENSION = /\.[A-Za-z0-9]{1,10}$/;

/** The artifact's name, or its id when it has none, with its type's extension when the name has none. */
export function deliveredFileName(name: string | null, artifactId: string, mimeType: string | null): string {
  const base = name ?? artifactId;
  const extension = HAS_EXTENSION.test(base) ? null : extensionOf(mimeType);
  if (!extension) return base;
  return base.endsWith(".") ? `${base}${extension}` : `${base}.${extension}`;
}
