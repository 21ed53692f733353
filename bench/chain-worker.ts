/**
 * The least the host's design must do per event, with none of its logic: the
 * hops issue 2 and ARCHITECTURE.md mandate, each done once, bare. It bounds
 * from below what `host_overhead` can reach on this machine.
 *
 * POST /events: one libSQL write (the event is durable before the answer), an
 * RPC to the conversation's Durable Object, which stores the run and sets its
 * alarm (runs live in the alarm handler). The alarm claims the run in libSQL
 * (a redelivered alarm must never run it twice), calls the runner, writes its
 * results in one libSQL write and ends the run's stream, which GET /stream
 * follows through an RPC to the same object.
 */
import { DurableObject } from "cloudflare:workers";
import { bindingExecutor } from "../src/db/executor";

interface ChainEnv {
  CHAIN: DurableObjectNamespace<ChainDO>;
  LIBSQL: Fetcher;
  LIBSQL_BINDING_TOKEN: string;
}

const encoder = new TextEncoder();

export class ChainDO extends DurableObject<ChainEnv> {
  private readonly followers = new Map<string, WritableStreamDefaultWriter<Uint8Array>>();
  private readonly ended = new Set<string>();

  private db() {
    return bindingExecutor(this.env.LIBSQL, this.env.LIBSQL_BINDING_TOKEN);
  }

  async dispatch(runId: string, runnerUrl: string): Promise<void> {
    await this.ctx.storage.put(runId, runnerUrl);
    await this.ctx.storage.setAlarm(Date.now());
  }

  override async alarm(): Promise<void> {
    for (const [runId, runnerUrl] of await this.ctx.storage.list<string>()) {
      const claimed = await this.db().query({ sql: "UPDATE chain_run SET status = 'running' WHERE id = ? AND status = 'created' RETURNING id", params: [runId], method: "all" });
      if (claimed.rows.length === 1) {
        const res = await fetch(runnerUrl, { method: "POST", body: JSON.stringify({ context: { run_id: runId } }) });
        const results = await res.text();
        await this.db().query({ sql: "UPDATE chain_run SET status = 'completed', results = ? WHERE id = ?", params: [results, runId], method: "run" });
      }
      await this.ctx.storage.delete(runId);
      this.ended.add(runId);
      const follower = this.followers.get(runId);
      if (follower) await follower.write(encoder.encode('event: end\ndata: {"status":"completed"}\n\n')).then(() => follower.close());
    }
  }

  async subscribe(runId: string): Promise<ReadableStream<Uint8Array>> {
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    const writer = writable.getWriter();
    if (this.ended.has(runId)) void writer.write(encoder.encode('event: end\ndata: {"status":"completed"}\n\n')).then(() => writer.close());
    else this.followers.set(runId, writer);
    return readable;
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const stub = env.CHAIN.get(env.CHAIN.idFromName(url.searchParams.get("c") ?? "c"));
    if (url.pathname === "/stream") {
      const body = await stub.subscribe(url.searchParams.get("run")!);
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    }
    const runId = crypto.randomUUID();
    const text = await request.text();
    await bindingExecutor(env.LIBSQL, env.LIBSQL_BINDING_TOKEN).query({ sql: "INSERT INTO chain_run (id, status, event) VALUES (?, 'created', ?)", params: [runId, text], method: "run" });
    await stub.dispatch(runId, url.searchParams.get("runner")!);
    return Response.json({ run_id: runId }, { status: 202 });
  },
} satisfies ExportedHandler<ChainEnv>;
