import type { ContentElement } from "../protocol/common";
import type { InputContext } from "../protocol/context";

/**
 * A chat message's input with its user's edit: `text`, and the text part of `contents`, which a message with files
 * carries ahead of them (ingress/attachments.ts) and a runner reading parts reads instead of `text`. Its files stay.
 */
export function withEditedText(input: InputContext, text: string | null): InputContext {
  if (input.contents.length === 0) return { ...input, text };
  const files = input.contents.filter((el) => el.type !== "text");
  const words: ContentElement[] = text ? [{ type: "text", text }] : [];
  return { ...input, text, contents: [...words, ...files] };
}
