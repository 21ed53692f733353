import { StreamableHTTPClientTransport, type StreamableHTTPClientTransportOptions } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { isJSONRPCRequest, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { TakeBytes } from "./upstream";

/**
 * Which call an MCP answer is counted against (RESOURCE_RESPONSE_BUDGET_BYTES), though a run's calls to a server share
 * one session. The SDK client numbers requests itself: a call registers the params object it hands the client, the
 * transport reports each request it sends (`sent`), whose params are that very object, and from then on the answer to
 * that request id (its POST's body, JSON or event stream) is counted by the call's `take` until the call is over.
 */
export class AnswerMeters {
  private readonly byParams = new WeakMap<object, { take: TakeBytes; ids: unknown[] }>();
  private readonly byId = new Map<unknown, TakeBytes>();

  /** Counts the answers to requests sent with `params` by `take`; the returned function ends that (the call is over). */
  register(params: object, take: TakeBytes): () => void {
    const entry = { take, ids: [] as unknown[] };
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
      entry.ids.push(m.id);
      this.byId.set(m.id, entry.take);
    }
  }

  /** What counts the answer to request `id` now, if a call still waits for it. */
  readonly takeFor = (id: unknown): TakeBytes | undefined => this.byId.get(id);
}

/** The SDK's streamable HTTP transport, telling `meters` of each message before it is sent. */
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
}
