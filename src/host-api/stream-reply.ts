/**
 * What an action returns to answer with a stream instead of `{ok, data}`
 * (`model.stream`): the body is passed through to the runner as it is produced.
 */
export class StreamReply {
  constructor(
    readonly body: ReadableStream<Uint8Array>,
    readonly contentType = "application/x-ndjson",
    /** `ended` settles once the stream's end is recorded; `close` stops it when its reader is gone (OpenStreams). */
    readonly lifecycle?: StreamLifecycle,
  ) {}
}

export interface StreamLifecycle {
  ended: Promise<void>;
  close: () => Promise<void>;
}
