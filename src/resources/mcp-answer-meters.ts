import { StreamableHTTPClientTransport, type StreamableHTTPClientTransportOptions } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { isJSONRPCRequest, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { TakeBytes } from "./upstream";

/** One call's count: its `take`, and how much of what was read for it (its request's own answer body) it took. */
interface Meter {
  take: TakeBytes;
  counted: number;
}

/** An answer's id, as the SDK client matches it to its request (Protocol: `Number(response.id)`). */
const answerId = (id: unknown): number => Number(id);

/**
 * Which call an MCP answer is counted against (RESOURCE_RESPONSE_BUDGET_BYTES), though a run's calls to a server share
 * one session. The SDK client numbers requests itself: a call registers the params object it hands the client, the
 * transport reports each request it sends (`sent`), whose params are that very object (the SDK copies them only for
 * options the host does not pass: onprogress, task, relatedTask), and from then on, until the call is over:
 * - its request's answer body (JSON or event stream) is counted by the call's `take` as it is read (`takeFor`);
 * - an answer to it that reaches the client by another way (the session's GET stream, another request's body: the
 *   client takes an answer from any of them) is counted when it arrives, for what the body read for it did not cover
 *   (`admits`), so each answer a call holds is counted against that call, wherever the server sent it.
 */
export class AnswerMeters {
  private readonly byParams = new WeakMap<object, Meter & { ids: number[] }>();
  private readonly byId = new Map<number, Meter>();

  /** Counts the answers to requests sent with `params` by `take`; the returned function ends that (the call is over). */
  register(params: object, take: TakeBytes): () => void {
    const entry = { take, counted: 0, ids: [] as number[] };
    this.byParams.set(params, entry);
    return () => {
      this.byParams.delete(params);
      for (const id of entry.ids) this.byId.delete(id);
    };
  }

  /** A message the transport is about to send. */
  sent(message: JSONRPCMessage | JSONRPCMessage[]): void {
    for (const m of Array.isArray(message) ? message : [message]) {
      if (!isJSONRPCRequest(m) || !m.params) continue;
      const entry = this.byParams.get(m.params);
      if (!entry) continue;
      entry.ids.push(answerId(m.id));
      this.byId.set(answerId(m.id), entry);
    }
  }

  /** What counts the body answering request `id` as it is read, if a call still waits for it. */
  readonly takeFor = (id: unknown): TakeBytes | undefined => {
    const meter = this.byId.get(answerId(id));
    return (
      meter &&
      ((bytes) => {
        meter.take(bytes);
        meter.counted += bytes;
      })
    );
  };

  /**
   * An answer about to reach the client: counted against the call it answers for what was not counted yet (its size
   * as JSON text, in characters as a model stream's text is, less the bytes of its request's body read meanwhile).
   * False when the call's `take` refused it: the call ends with that refusal, the answer is dropped.
   */
  admits(message: JSONRPCMessage): boolean {
    if (!("id" in message) || !("result" in message || "error" in message)) return true;
    const meter = this.byId.get(answerId(message.id));
    if (!meter) return true;
    const size = JSON.stringify(message).length;
    if (size <= meter.counted) return true;
    try {
      meter.take(size - meter.counted);
    } catch {
      return false;
    }
    meter.counted = size;
    return true;
  }
}

/** The SDK's streamable HTTP transport, telling `meters` of each message before it is sent and each answer before it is taken. */
export class MeteredTransport extends StreamableHTTPClientTransport {
  constructor(
    url: URL,
    opts: StreamableHTTPClientTransportOptions,
    private readonly meters: AnswerMeters,
  ) {
    super(url, opts);
  }

  override send(message: JSONRPCMessage | JSONRPCMessage[], options?: Parameters<StreamableHTTPClientTransport["send"]>[1]): Promise<void> {
    this.meters.sent(message);
    return super.send(message, options);
  }

  /**
   * From now on, what reaches the client (the handler its `connect` set) is first let through by the meters: called
   * once the client is connected, before any call is made on the session.
   */
  meterArrivals(): void {
    const deliver = this.onmessage;
    this.onmessage = (message: JSONRPCMessage) => {
      if (this.meters.admits(message)) deliver?.(message);
    };
  }
}
