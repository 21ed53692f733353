import { textOfElements, type Message } from "../protocol/common";

/** Both built by JSON.parse of a line, so equal content serialises equally. */
export const sameMessage = (a: Message, b: Message | undefined) => b !== undefined && JSON.stringify(a) === JSON.stringify(b);

/** A message's text: its content, or the text of its elements. */
export function messageText(message: Message): string {
  if (typeof message.content === "string") return message.content;
  return textOfElements(message.content);
}
