/** One assistant message of a run on its way to the chat (DeliverySession). */

/** One platform message of a reply: what it shows now and when it was last written. */
export interface SentMessage {
  id: string;
  shown: string;
  lastWriteAt: number;
}

/** One assistant message on its way out: the streamed text so far, then its final text. */
export interface Reply {
  index: number;
  /** Which of the run's transcript messages it shows (FinalAnswer.itemOf; the next one while it streams), null for none: its trail names it. */
  item: number | null;
  text: string;
  final: string | null;
  messages: SentMessage[];
  /** Artifact ids sent after the text, each as a message of its own. */
  files: string[];
  pumping: boolean;
  /** A streamed write failed for good: stop streaming, still try the final text. */
  broken: boolean;
  /** Parts whose send failed but may have been posted, with their text: the same text is not sent again. */
  unconfirmed: Map<number, string>;
  /** Shown instead of the draft when none of it reached the chat (the run failed; "": nothing, the host cancelled it), or null. */
  unshownNotice?: string | null;
  /** Its run ended mid-draft without its answer (the host cancelled it, or it failed): a draft already shown ends with this (endMarkOf). */
  endMark?: string | null;
}
