import { createClient } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { migrate } from "drizzle-orm/libsql/migrator";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { DeliveryPolicySchema, ResourcePolicySchema, StatePolicySchema } from "../../src/agents/policy";
import { createDb } from "../../src/db/client";
import { libsqlExecutor } from "../../src/db/executor";
import { configOf, type Env } from "../../src/env";
import { executeRun } from "../../src/run/execute";
import type { RunJob } from "../../src/run/job";
import { freezeSnapshot } from "../../src/run/snapshot";

const RUN = "run_0123456789abcdef";

/**
 * Two inline artifacts in one chunk of results; R2 stores the first and refuses the second, tried again too. Only
 * the second is lost (dropped; `artifacts-faults.test.ts` has the whole batch through the Worker); the stream then ends
 * without a terminal result, so the run fails. What it leaves must hold together, as README promises for a failed
 * write (`upload-refused-row.test.ts`: "neither a blob no row names ... nor a transcript item naming an artifact that
 * has no row"): no transcript item names an artifact without a row, and no blob the run put stays without one.
 */
describe("an inline artifact whose blob R2 refuses after another of its batch was stored", () => {
  it("leaves no transcript item naming an artifact that has no row, and no blob without a row", async () => {
    const client = createClient({ url: ":memory:" });
    await migrate(drizzle(client), { migrationsFolder: "migrations" });
    const db = createDb(libsqlExecutor(client));
    // As its claim leaves it: a run's result rows are written only while it is running.
    await client.execute({ sql: "INSERT INTO run (run_id, event_id, conversation_key, agent_id, runner_id, status, created_at, started_at) VALUES (?, 'evt_1', '//c1/', 'a1', 'http:t/t/default', 'running', 1, 1)", args: [RUN] });

    const server = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        const line = (type: string, data: unknown, sequence: number) => `${JSON.stringify({ run_id: RUN, type, data, sequence })}\n`;
        res.writeHead(200, { "content-type": "application/x-ndjson" });
        res.end(
          line("artifact.created", { artifact_type: "file", name: "a.txt", mime_type: "text/plain", content_base64: Buffer.from("first").toString("base64") }, 1) +
            line("artifact.created", { artifact_type: "file", name: "b.txt", mime_type: "text/plain", content_base64: Buffer.from("second").toString("base64") }, 2),
        );
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    const blobs = new Map<string, Uint8Array>();
    let puts = 0;
    const bucket = {
      async put(key: string, value: Uint8Array) {
        // From the second on, each put (its retries too) is refused: R2 away for longer than a blip.
        if (++puts >= 2) throw new Error("R2 unavailable (drill)");
        blobs.set(key, value);
        return {};
      },
      async delete(keys: string | string[]) {
        for (const k of Array.isArray(keys) ? keys : [keys]) blobs.delete(k);
      },
    } as unknown as R2Bucket;

    const job = {
      runId: RUN,
      conversationKey: "//c1/",
      publicBaseUrl: "http://127.0.0.1:1",
      event: { event_id: "evt_1", event_type: "message.received", source: "api", data: {} },
      eventSeq: 1,
      transcriptSeq: null,
      latestTranscriptSeq: null,
      conversation: { conversation_id: "c1" },
      actor: { actor_type: "user", actor_id: "u1", metadata: {} },
      subject: null,
      input: { text: "hi", contents: [], attachments: [] },
      agent: { agentId: "a1", runnerConfig: {}, resourcePolicy: ResourcePolicySchema.parse({}), statePolicy: StatePolicySchema.parse({ enable_state: false }), deliveryPolicy: DeliveryPolicySchema.parse({}), concurrency: {} },
      runner: { runnerId: "http:t/t/default", runnerName: "default", serviceId: "svc", baseUrl, capabilities: {}, permissions: {} },
    } as unknown as RunJob;
    const snapshot = freezeSnapshot(job, Date.now() + 30_000, {});
    const outcome = await executeRun({
      db,
      artifacts: bucket,
      config: configOf({ ADMIN_TOKEN: "test-admin-token-0123456789abcdef" } as unknown as Env),
      job,
      snapshot,
      state: { values: { conversation: {}, actor: {}, subject: {}, runner: {} }, partial: [] } as never,
      token: "t",
      runner: { baseUrl, secret: null },
      signal: new AbortController().signal,
      publish: () => {},
    }).catch((err: Error) => ({ status: "threw", errorMessage: err.message }));
    server.close();

    const rows = new Set((await client.execute("SELECT artifact_id FROM artifact")).rows.map((r) => String(r.artifact_id)));
    const items = (await client.execute("SELECT artifact_refs_json FROM transcript WHERE run_id = ?", [RUN])).rows;
    const named: string[] = items.flatMap((i) => JSON.parse(String(i.artifact_refs_json ?? "[]")).map((r: { artifact_id: string }) => r.artifact_id));
    const blobsWithoutRow = [...blobs.keys()].filter((k) => !rows.has(k.replace(/^artifacts\//, "")));
    expect(outcome.status).toBe("failed");
    expect({ namedWithoutRow: named.filter((id) => !rows.has(id)), blobsWithoutRow }).toEqual({ namedWithoutRow: [], blobsWithoutRow: [] });
    client.close();
  });
});
