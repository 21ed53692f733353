import { createClient } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { migrate } from "drizzle-orm/libsql/migrator";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { createDb } from "../../src/db/client";
import { libsqlExecutor } from "../../src/db/executor";
import { RunArtifactRefs } from "../../src/run/artifact-refs";
import { ResultProcessor } from "../../src/run/results";

const RUN = "run_0123456789abcdef";

/**
 * `artifact.created {artifact_id}` naming an artifact the run may not attach (here: none exists) is dropped (README,
 * Artifacts). What the run keeps of it must not outlive its batch: ResultProcessor says it "holds O(1) state per run",
 * and one runner's stream (RUNNER_MAX_STREAM_BYTES, 32 MiB) must not fill the conversation object's memory, which every
 * run of the conversation (and other conversations' objects in the isolate) shares.
 */
describe("references the host refused", () => {
  it("are not kept for the rest of the run", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const client = createClient({ url: ":memory:" });
    await migrate(drizzle(client), { migrationsFolder: "migrations" });
    const db = createDb(libsqlExecutor(client));
    const processor = new ResultProcessor({ runId: RUN, runnerId: "http:a/b/c", eventId: "evt_1", place: { conversationKey: "//c1/", conversationId: "c1" }, stateScopes: {} });
    const refs = new RunArtifactRefs(db, { conversationKey: "//c1/", runId: RUN, audience: null });
    gc();
    const before = process.memoryUsage().heapUsed;
    // As executeRun applies each network chunk: processed, references checked, refused ones dropped.
    let bytes = 0;
    let n = 0;
    let dropped = 0;
    while (bytes < 16 * 1024 * 1024) {
      const lines: string[] = [];
      for (let i = 0; i < 500; i++) {
        const line = JSON.stringify({ run_id: RUN, type: "artifact.created", data: { artifact_id: `art_missing_${n++}`, artifact_type: "file" } });
        bytes += line.length + 1;
        lines.push(line);
      }
      const batch = processor.process(lines);
      await refs.check(batch.artifactReferences.map((r) => r.ref.artifact_id));
      for (const { ref, recorded } of batch.artifactReferences) {
        const refusal = refs.refusal(ref.artifact_id);
        if (refusal) {
          processor.refuseReference(batch, recorded, ref.artifact_id, refusal);
          dropped++;
        }
      }
    }
    gc();
    const retained = process.memoryUsage().heapUsed - before;
    expect(dropped).toBe(n);
    // Kept whole: about 40 MB for these 16 MiB of lines (150,000 references). Nothing of them needs keeping.
    expect(retained).toBeLessThan(4 * 1024 * 1024);
    // Still usable: the run's end has no item of artifacts to write, and a message carries none of them.
    expect(processor.finish().transcriptItems).toEqual([]);
    expect(refs.resolve([{ artifact_id: "art_missing_1" } as never])).toEqual([]);
    client.close();
  }, 60_000);
});
