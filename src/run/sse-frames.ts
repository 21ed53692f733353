/**
 * The bytes of a run's SSE stream (GET /v1/runs/{id}/stream): `event: result` frames, the `event: end` frame and
 * the keep-alive comment. Each result frame's `id:` line is its follower's own (Subscriber in live.ts).
 */
export interface LiveFrame {
  seq: number;
  type: string;
  data: unknown;
  sequence?: number | null;
  origin: string;
}

const encoder = new TextEncoder();

/** Frames are encoded once, whatever the number of subscribers and replays. */
const encoded = new WeakMap<LiveFrame, Uint8Array>();

/** A result frame, without its `id:` line (which is the follower's own, see Subscriber). */
export function sseFrame(frame: LiveFrame): Uint8Array {
  let bytes = encoded.get(frame);
  if (!bytes) {
    bytes = encoder.encode(`event: result\ndata: ${JSON.stringify(frame)}\n\n`);
    encoded.set(frame, bytes);
  }
  return bytes;
}
/**
 * The `id` of the end frame. EventSource reconnects whenever a stream closes, so a client that does not close it on
 * `end` comes back naming this, and is answered 204 No Content, which tells it to stop (routes/runs.ts).
 */
export const END_FRAME_ID = "end";
export function sseEnd(status: string): Uint8Array {
  return encoder.encode(`id: ${END_FRAME_ID}\nevent: end\ndata: ${JSON.stringify({ status })}\n\n`);
}
/** An SSE comment: readers ignore it, and proxies that close idle connections see bytes. */
export const KEEP_ALIVE = encoder.encode(": keep-alive\n\n");
