/**
 * What an action returns to answer with a stream instead of `{ok, data}`
 * (`model.stream`): the body is passed through to the runner as it is produced.
 */
export class StreamReply {
  constructor(
    readonly body: ReadableStream<Uint8Array>,
    readonly contentType = "application/x-ndjson",
  ) {}
}
