import type { ApiResult, Messenger } from "../platforms/types";
import type { RunJob } from "../run/job";

/**
 * Where a reply is marked before each platform call that can show something in the chat (a send, a file's post): the
 * conversation object's storage (durable-objects/pending-replies.ts), whose output gate holds the call until the mark is
 * durable. An instance that dies while a call is on the wire never records its outcome; the next one, resuming the
 * reply, reads the mark and does not post again what the chat may already show.
 */
export interface PostingMarks {
  /** A call of the run's reply that may show in the chat is about to be made. */
  posting(runId: string): void;
  /** Its outcome: taken, maybe taken (no answer came), or refused (which takes the mark back if nothing before it may show). */
  posted(runId: string, result: ApiResult<unknown>): void;
  /** Whether sending the run's reply anew could show twice what the chat may already show of it (its marks say a call was, or may have been, taken). */
  wouldShowTwice(job: RunJob): Promise<boolean>;
  /** An earlier instance's mark of a reply that has been dealt with (answered anew, or not sent again). */
  forget(runId: string): void;
}

/** The messenger with its sends and file posts marked (edits change a message already shown). */
export function markedMessenger(messenger: Messenger, marks: PostingMarks | undefined, runId: string): Messenger {
  if (!marks) return messenger;
  const marked =
    <A extends unknown[], T>(call: (...args: A) => Promise<ApiResult<T>>) =>
    async (...args: A): Promise<ApiResult<T>> => {
      marks.posting(runId);
      const result = await call(...args);
      marks.posted(runId, result);
      return result;
    };
  return { send: marked(messenger.send.bind(messenger)), sendFile: marked(messenger.sendFile.bind(messenger)), edit: messenger.edit.bind(messenger), postsLeft: () => messenger.postsLeft?.(), chatOf: (id) => messenger.chatOf?.(id) };
}
