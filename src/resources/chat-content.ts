import type { ContentElement } from "../protocol/common";

/** A runner's model call that the provider format cannot express; `details` name the element at fault. */
export class ModelInputError extends Error {
  override readonly name = "ModelInputError";
  constructor(
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

/** An artifact a model call sends inline: read by the host (a provider cannot fetch the host's artifacts). */
export interface InlineArtifact {
  /** Bare media type (no parameters): what the data URL and the audio format are made of. */
  mimeType: string;
  base64: string;
  /** Its stored name, the filename of a file element that gives none. */
  name: string | null;
}
/** The artifacts named by image, file and audio elements, by id. */
export type InlineArtifacts = ReadonlyMap<string, InlineArtifact>;

/** An element that names an artifact, and where it stands in `messages` (as errors name it). */
export interface ArtifactElement {
  at: string;
  type: "image" | "file" | "audio";
  artifactId: string;
}

/**
 * The OpenAI chat-completions `input_audio.format` of an audio media type: the API takes wav and mp3 only, so
 * anything else (a voice note's ogg/opus, m4a, webm) is refused here rather than by the provider.
 */
const AUDIO_FORMATS: Record<string, "wav" | "mp3"> = {
  "audio/wav": "wav",
  "audio/x-wav": "wav",
  "audio/wave": "wav",
  "audio/vnd.wave": "wav",
  "audio/mpeg": "mp3",
  "audio/mp3": "mp3",
  "audio/mpeg3": "mp3",
  "audio/x-mpeg-3": "mp3",
};
export const audioFormat = (mimeType: string): "wav" | "mp3" | undefined => AUDIO_FORMATS[mimeType];

/**
 * Why the provider cannot take `artifact` as the element `el` (null: it can). By `mime_type`: an image element takes
 * an image, an audio element wav or mp3; a file element any file, the provider judging what it can read.
 */
export function inlineRefusal(el: ArtifactElement, artifact: { mimeType: string; shownType: string }): string | null {
  const what = `${el.at}: ${el.type} artifact ${el.artifactId}`;
  if (el.type === "image" && !artifact.mimeType.startsWith("image/")) return `${what} is not an image (mime_type ${artifact.shownType})`;
  if (el.type === "audio" && !artifact.mimeType.startsWith("audio/")) return `${what} is not audio (mime_type ${artifact.shownType})`;
  if (el.type === "audio" && !audioFormat(artifact.mimeType)) return `${what} is ${artifact.mimeType}; OpenAI-compatible chat completions take audio as wav or mp3 only (input_audio.format)`;
  return null;
}

/**
 * The elements of `messages` that name an artifact to send inline (an image by url is the provider's to fetch).
 * OpenAI chat completions take audio and file parts in user messages only: elsewhere they are refused here.
 */
export function artifactElements(messages: readonly { role: string; content?: string | readonly ContentElement[] | null }[]): ArtifactElement[] {
  const found: ArtifactElement[] = [];
  messages.forEach((message, i) => {
    if (!Array.isArray(message.content)) return;
    (message.content as readonly ContentElement[]).forEach((el, j) => {
      const at = `messages[${i}].content[${j}]`;
      if (el.type === "text" || (el.type === "image" && (el.url || !el.artifact_id))) return;
      if (el.type !== "image" && message.role !== "user") {
        throw new ModelInputError(`${at}: ${el.type === "audio" ? "an audio" : "a file"} element is sent only in a user message (OpenAI-compatible chat completions take ${el.type === "audio" ? "input_audio" : "file"} parts there alone), not in a ${message.role} message`, { element: at, artifact_id: el.artifact_id });
      }
      found.push({ at, type: el.type, artifactId: el.artifact_id! });
    });
  });
  return found;
}

/** A ContentElement as an OpenAI content part: text; an image by url, or by artifact_id inline; a file or audio inline. */
export function contentPart(el: ContentElement, inline: InlineArtifacts): Record<string, unknown> {
  if (el.type === "text") return { type: "text", text: el.text };
  if (el.type === "image" && el.url) return { type: "image_url", image_url: { url: el.url } };
  const artifact = el.artifact_id ? inline.get(el.artifact_id) : undefined;
  if (!artifact) throw new ModelInputError(`a ${el.type} element names artifact ${el.artifact_id ?? "(none)"}, which was not read for this call`);
  const dataUrl = () => `data:${artifact.mimeType};base64,${artifact.base64}`;
  if (el.type === "image") return { type: "image_url", image_url: { url: dataUrl() } };
  // input_audio takes bare base64 and names its format; it has no filename.
  if (el.type === "audio") {
    const format = audioFormat(artifact.mimeType);
    if (!format) throw new ModelInputError(`audio artifact ${el.artifact_id} is ${artifact.mimeType}; OpenAI-compatible chat completions take audio as wav or mp3 only`);
    return { type: "input_audio", input_audio: { data: artifact.base64, format } };
  }
  // A filename is required beside file_data: the runner's name, else the stored one, else the id.
  return { type: "file", file: { filename: el.name || artifact.name || el.artifact_id, file_data: dataUrl() } };
}
