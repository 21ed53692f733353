/** The first `max` UTF-16 units of `text`, one fewer when the cut would split a surrogate pair (stored, half a pair is U+FFFD). */
export function headOf(text: string, max: number): string {
  const head = text.slice(0, max);
  const last = head.charCodeAt(head.length - 1);
  return head.length === max && last >= 0xd800 && last <= 0xdbff ? head.slice(0, -1) : head;
}
