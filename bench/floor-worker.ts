/**
 * The floor the host overhead is compared with: a bare Worker → Durable
 * Object → runner fetch round trip with one libSQL write, over the same
 * transport the host uses. Nothing else.
 */
import { DurableObject } from "cloudflare:workers";
import { bindingExecutor } from "../src/db/executor";

interface FloorEnv {
  FLOOR: DurableObjectNamespace<FloorDO>;
  LIBSQL: Fetcher;
  LIBSQL_BINDING_TOKEN: string;
}

export class FloorDO extends DurableObject<FloorEnv> {
  async run(runnerUrl: string, id: string): Promise<number> {
    const res = await fetch(runnerUrl, { method: "POST", body: JSON.stringify({ id }) });
    const text = await res.text();
    await bindingExecutor(this.env.LIBSQL, this.env.LIBSQL_BINDING_TOKEN).query({ sql: "INSERT INTO floor (id, body) VALUES (?, ?)", params: [id, text], method: "run" });
    return text.length;
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const conversation = url.searchParams.get("c") ?? "c";
    const stub = env.FLOOR.get(env.FLOOR.idFromName(conversation));
    const size = await stub.run(url.searchParams.get("runner")!, crypto.randomUUID());
    return Response.json({ size });
  },
} satisfies ExportedHandler<FloorEnv>;
