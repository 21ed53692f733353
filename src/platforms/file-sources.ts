/** A platform event's files as sources to store (src/artifacts/input.ts): those the platform gives, and why not the others. */
import type { InputAttachmentSource } from "../artifacts/input";
import { HostError } from "../lib/errors";
import { scrubSecrets } from "./redact";
import { REPLIED_MESSAGE_KEY } from "./reply-context";
import { PLATFORM_FILE_KEY } from "../stores/recalled-files";
import type { Bot, NormalizedEvent, PlatformAdapter, PlatformFile } from "./types";

/** `timeLeft`: until the platform's acknowledgement deadline; a file with none left is left out, and said so. */
export async function fileSources(adapter: PlatformAdapter, bot: Bot, event: NormalizedEvent, files: PlatformFile[], timeLeft: () => number): Promise<{ sources: InputAttachmentSource[]; unavailable: string[] }> {
  const sources: InputAttachmentSource[] = [];
  const unavailable: string[] = [];
  for (const file of files) {
    // Stored when its message was received (stored-reply.ts): nothing to fetch.
    if (file.artifactId !== undefined) {
      sources.push({ kind: "artifact", artifactId: file.artifactId, repliedMessageId: file.repliedMessageId });
      continue;
    }
    // A message of another chat may come with no id (Telegram's external_reply of a private chat's): named without one.
    const replied = file.repliedMessageId ? `the replied message ${file.repliedMessageId}` : "the replied message";
    const name = file.repliedMessageId === undefined ? (file.name ?? "a file") : `${file.name ?? "a file"} of ${replied}`;
    if (timeLeft() <= 0) {
      unavailable.push(`${name} (not fetched within the platform's acknowledgement deadline)`);
      continue;
    }
    try {
      sources.push(markedSource(await adapter.download(bot, file, event, timeLeft()), file));
    } catch (err) {
      if (!(err instanceof HostError) || err.status >= 500) throw err;
      unavailable.push(`${name} (${scrubSecrets(err.message, bot.credentials)})`);
    }
  }
  return { sources, unavailable };
}

/**
 * A replied message's file is stored marked as its (withReplyAttachments names it in `reply_to`); a message's own file
 * with its lasting id (PLATFORM_FILE_KEY), which tells a later edit that replaced it (../stores/recalled-files.ts).
 */
function markedSource(source: InputAttachmentSource, file: PlatformFile): InputAttachmentSource {
  if (source.kind === "artifact" || source.kind === "stored") return source;
  if (file.repliedMessageId !== undefined) return { ...source, metadata: { ...source.metadata, [REPLIED_MESSAGE_KEY]: file.repliedMessageId } };
  return file.uniqueId === undefined ? source : { ...source, metadata: { ...source.metadata, [PLATFORM_FILE_KEY]: file.uniqueId } };
}
