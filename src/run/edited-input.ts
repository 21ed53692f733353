import type { ContentElement } from "../protocol/common";
import type { InputContext } from "../protocol/context";

/**
 * A chat message's edit as it reaches a message still waiting: its words now, the edit's version, and the artifacts
 * of files the edit replaced (a Telegram photo swapped: src/stores/recalled-files.ts), expired already.
 */
export interface MessageEdit {
  text: string | null;
  version: number;
  dropped?: string[];
}

/**
 * A chat message's input with its user's edit: `text`, and the text part of `contents`, which a message with files
 * carries ahead of them (ingress/attachments.ts) and a runner reading parts reads instead of `text`. Its files stay,
 * save those `dropped` (replaced by the edit, expired: a runner would read a 404 for them).
 */
export function withEditedText(input: InputContext, text: string | null, dropped: readonly string[] = []): InputContext {
  const kept = withoutFiles(input, dropped);
  if (kept.contents.length === 0) return { ...kept, text };
  const files = kept.contents.filter((el) => el.type !== "text");
  const words: ContentElement[] = text ? [{ type: "text", text }] : [];
  return { ...kept, text, contents: [...words, ...files] };
}

/** `input` without the files of artifacts `dropped` (in its attachments and its parts), the rest in their order; itself when it names none. */
export function withoutFiles(input: InputContext, dropped: readonly string[]): InputContext {
  const gone = new Set(dropped);
  const keeps = (el: { artifact_id?: string | null }) => !el.artifact_id || !gone.has(el.artifact_id);
  if (input.attachments.every(keeps) && input.contents.every((el) => !("artifact_id" in el) || keeps(el))) return input;
  return { ...input, attachments: input.attachments.filter(keeps), contents: input.contents.filter((el) => !("artifact_id" in el) || keeps(el)) };
}
