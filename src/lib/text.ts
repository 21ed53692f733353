/** The first `max` UTF-16 units of `text`, one fewer when the cut would split a surrogate pair (stored, half a pair is U+FFFD). */
export function headOf(text: string, max: number): string {
  const head = text.slice(0, max);
  const last = head.charCodeAt(head.length - 1);
  return head.length === max && last >= 0xd800 && last <= 0xdbff ? head.slice(0, -1) : head;
}

const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * Text from elsewhere (a chat platform's message, a runner's line quoted in an error) as a text column can hold it:
 * a NUL (at which the embedded driver cuts text short when reading) and an unpaired surrogate (which UTF-8 cannot
 * hold: stored, it comes back as U+FFFD) become U+FFFD here, before anyone is given it, so every reader sees the same.
 */
export const storableText = (text: string): string => text.replace(UNSTORABLE, "\ufffd");
