import { randomHex } from "../lib/crypto";
import type { StreamLifecycle } from "./stream-reply";

/**
 * A run's streamed Host API answers (`model.stream`) that have not ended.
 * The object holding such a stream is not told when the runner's request
 * goes away: the bytes cross an RPC pipe whose far end just stops reading.
 * The Worker that served the request is told (`Request.signal`) and closes
 * the stream here by its id, so the provider call stops instead of streaming
 * into nothing until the run ends. Ids are random: only the Worker that
 * answered with a stream knows its id.
 */
export class OpenStreams {
  private readonly closers = new Map<string, () => Promise<void>>();

  /** `track`: the run's end waits (a moment) for each stream's end to be recorded. */
  constructor(private readonly track: (ended: Promise<void>) => unknown) {}

  open(stream: StreamLifecycle): string {
    const id = randomHex(16);
    this.closers.set(id, stream.close);
    this.track(stream.ended.finally(() => this.closers.delete(id)));
    return id;
  }

  /** Its reader went away: a stream already over, or not this run's, is nothing to close. */
  async close(id: string): Promise<void> {
    const close = this.closers.get(id);
    this.closers.delete(id);
    await close?.();
  }
}
