/**
 * How much of one run a chat is shown: at most `max` of its messages and `max` of its files (each file is a chat
 * message of its own). What goes past is counted, never held, and said once at the end, so a runaway runner neither
 * floods the chat nor fills the conversation object's memory. The transcript keeps everything.
 */
export class ShownCap {
  private filesShown = 0;
  private messagesPast = 0;
  private filesPast = 0;

  constructor(private readonly max: number) {}

  /** Whether a reply numbered `replies + 1` would be past the cap. */
  full(replies: number): boolean {
    return replies >= this.max;
  }

  /** A message not shown, with the files it carried. */
  messageCut(files: number): void {
    this.messagesPast++;
    this.filesPast += files;
  }

  /** Files announced and not yet given to a message that can still be held: past that, only counted (`fileCut`). */
  get filesLeft(): number {
    return this.max - this.filesShown;
  }

  fileCut(): void {
    this.filesPast++;
  }

  /** The first of `ids` that still fit, now counted as shown; the rest counted as cut. */
  take(ids: readonly string[]): string[] {
    const shown = ids.slice(0, Math.max(0, this.filesLeft));
    this.filesShown += shown.length;
    this.filesPast += ids.length - shown.length;
    return shown;
  }

  /** Said once after the run's last reply shown, or null when nothing was cut. */
  notice(): string | null {
    const parts = [count(this.messagesPast, "message"), count(this.filesPast, "file")].filter((p) => p !== null);
    if (!parts.length) return null;
    const one = this.messagesPast + this.filesPast === 1;
    return `(${parts.join(" and ")} of this answer ${one ? "is" : "are"} not shown here.)`;
  }
}

const count = (n: number, what: string): string | null => (n === 0 ? null : `${n} more ${what}${n === 1 ? "" : "s"}`);
