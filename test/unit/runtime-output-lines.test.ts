import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { captureStdio, withoutRoutineLines } from "../../local/host";

/**
 * The Worker's output as tests, benchmarks and `captureLogs` read it: workerd's stdout (console.log: decisions, runs
 * that ended well) and stderr (console.warn/error: failures) are read in chunks that may end anywhere, and reach one
 * callback. A line cut in one stream is never joined by the other's, so a failure's line is never filtered out with a
 * routine one, nor a JSON line broken.
 */
async function captured(writes: ["out" | "err", string | Buffer][]) {
  const [stdout, stderr] = [new PassThrough(), new PassThrough()];
  let shown = "";
  let all = "";
  const filtered = withoutRoutineLines((text) => (shown += text));
  captureStdio((text) => {
    all += text;
    filtered(text);
  })(stdout, stderr);
  for (const [to, chunk] of writes) {
    (to === "out" ? stdout : stderr).write(chunk);
    // Each chunk read before the next is written, as two pipes are read in turn.
    await new Promise((r) => setImmediate(r));
  }
  stdout.end();
  stderr.end();
  await new Promise((r) => setImmediate(r));
  return { shown, all };
}

describe("the Worker's output, line by line", () => {
  const decision = '{"log":"host_api.decision","run_id":"run_1","outcome":"allowed"}';
  const completed = '{"log":"run.ended","status":"completed","run_id":"run_2"}';
  const failed = '{"log":"run.ended","status":"failed","run_id":"run_3"}';

  it("keeps a stderr line read while a stdout line was cut, and drops the routine one whole", async () => {
    const { shown, all } = await captured([
      ["out", decision.slice(0, 30)],
      ["err", `${failed}\n`],
      ["out", `${decision.slice(30)}\n${completed.slice(0, 25)}`],
      ["err", "run run_4: reply not delivered, given up\n"],
      ["out", `${completed.slice(25)}\n`],
    ]);
    expect(shown).toBe(`${failed}\nrun run_4: reply not delivered, given up\n`);
    // Every line whole, whatever stream it came from: each JSON line parses.
    const lines = all.split("\n").filter(Boolean);
    expect(lines.sort()).toEqual([decision, completed, failed, "run run_4: reply not delivered, given up"].sort());
  });

  it("keeps a character cut between two chunks whole", async () => {
    const bytes = Buffer.from("run run_5: failed — conversation é\n");
    const cut = bytes.indexOf(Buffer.from("é")) + 1;
    const { shown } = await captured([
      ["err", bytes.subarray(0, cut)],
      ["err", bytes.subarray(cut)],
    ]);
    expect(shown).toBe("run run_5: failed — conversation é\n");
  });
});
