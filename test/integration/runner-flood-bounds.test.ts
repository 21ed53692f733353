import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { callHostApi } from "../support/host-api";
import { runLedger } from "../support/scripted-runner";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * What bounds a flooding run beyond its message and state.updated counts (README, Writing a runner): run.completed's
 * own message (or the answer streamed as deltas it completes) counts against RUN_MAX_MESSAGES; state.set calls and
 * state.updated results take from one RUN_MAX_STATE_UPDATES; every result line counts against RUN_MAX_RESULTS; and
 * each unknown result type is warned of only a few times, the rest counted once before the run's end.
 */
const CAP = 3;
const MAX_RESULTS = 20;
/** A run's own warnings per unknown type (src/run/unknown-type-warnings.ts). */
const UNKNOWN_WARNINGS = 5;

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

type Ctx = { run_id: string; input: { text: string }; runtime: { api: { base_url: string; token: string } } };
const api = (ctx: Ctx, action: string, params: Record<string, unknown>) => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, action, params);
/** What the run's state.set calls were answered, for the test to read. */
const setAnswers = new Map<string, { status: number; body: any }[]>();

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "flood-bounds",
    async onRun({ body }, res) {
      const ctx = body.context as Ctx;
      const w = resultWriter(res, ctx.run_id);
      const messages = (n: number) => {
        for (let i = 1; i <= n; i++) w.send("message.completed", { message: { role: "assistant", content: `m${i}` } });
      };
      const mode = ctx.input.text;
      if (mode === "final past cap") {
        messages(CAP);
        w.send("run.completed", { finish_reason: "stop", message: { role: "assistant", content: "final" } });
      } else if (mode === "streamed past cap") {
        messages(CAP);
        for (const word of ["stre", "amed"]) w.send("message.delta", { chunk: { role: "assistant", content: word } });
        w.send("run.completed", { finish_reason: "stop" });
      } else if (mode === "final at cap") {
        messages(CAP - 1);
        w.send("run.completed", { finish_reason: "stop", message: { role: "assistant", content: "final" } });
      } else if (mode === "unknown types") {
        for (let i = 0; i < UNKNOWN_WARNINGS + 3; i++) w.send("x.often", { i });
        w.send("x.rare", {});
        return w.reply("done");
      } else if (mode === "many duplicates") {
        // One numbered result sent again and again: each copy is a line read (and a warning row), not a result applied.
        for (let i = 0; i < MAX_RESULTS + 5; i++) w.send("message.delta", { chunk: { role: "assistant", content: "x" } }, 1);
        return w.reply("never read");
      } else if (mode === "sets then result") {
        const answers: { status: number; body: any }[] = [];
        for (let i = 1; i <= CAP + 1; i++) answers.push(await api(ctx, "state.set", { scope: "conversation", key: `a-set${i}`, value: i }));
        setAnswers.set(ctx.run_id, answers);
        w.send("state.updated", { scope: "conversation", key: "a-res1", value: 1 });
        return w.reply("never applied");
      } else if (mode === "results then set") {
        for (let i = 1; i <= CAP; i++) w.send("state.updated", { scope: "conversation", key: `b-res${i}`, value: i });
        // Written each read (RUN_WRITE_INTERVAL_MS 0): once the last is readable, all three were counted.
        while (!(await api(ctx, "state.get", { scope: "conversation", key: `b-res${CAP}` })).body.data.found) await new Promise((r) => setTimeout(r, 20));
        setAnswers.set(ctx.run_id, [await api(ctx, "state.set", { scope: "conversation", key: "b-set", value: 1 })]);
        return w.reply("saved");
      } else {
        return w.reply(`echo: ${mode}`);
      }
      res.end();
    },
  });
  host = await startTestHost({
    vars: { RUN_MAX_MESSAGES: String(CAP), RUN_MAX_STATE_UPDATES: String(CAP), RUN_MAX_RESULTS: String(MAX_RESULTS), RUN_WRITE_INTERVAL_MS: "0" },
  });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "flood-bounds" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

async function runIn(conv: string, text: string) {
  const posted = await host.postEvent(messageEvent(conv, text));
  const run = await host.waitForRun(posted.body.run_id!);
  const items = await host.query<{ role: string; content: string }>("SELECT role, content FROM transcript WHERE conversation_id = ? ORDER BY seq", [conv]);
  const ledger = (await runLedger(host, run.run_id)) as { type: string; origin: string; data: any }[];
  return { run, answers: items.filter((i) => i.role === "assistant").map((i) => i.content), ledger };
}

const stateKeys = async (prefix: string) =>
  (await host.query<{ key: string }>("SELECT key FROM runner_state WHERE runner_id = ? AND scope = 'conversation' AND key LIKE ? ORDER BY key", [runner.runnerId(), `${prefix}%`])).map((r) => r.key);

describe("run.completed's message and RUN_MAX_MESSAGES", () => {
  it("fails a run whose run.completed brings a message past the cap, keeping the messages before it", async () => {
    const { run, answers, ledger } = await runIn("bounds-final", "final past cap");
    expect([run.status, run.error?.code]).toEqual(["failed", "runner.too_many_messages"]);
    expect(run.error?.message).toContain(`more than ${CAP} messages (RUN_MAX_MESSAGES)`);
    expect(answers).toEqual(["m1", "m2", "m3"]);
    expect(ledger.at(-1)).toMatchObject({ type: "run.failed", origin: "host", data: { code: "runner.too_many_messages" } });
  });

  it("counts an answer streamed as deltas that run.completed completes, and completes a run whose final message is at the cap", async () => {
    const streamed = await runIn("bounds-streamed", "streamed past cap");
    expect([streamed.run.status, streamed.run.error?.code]).toEqual(["failed", "runner.too_many_messages"]);
    expect(streamed.answers).toEqual(["m1", "m2", "m3"]);
    const atCap = await runIn("bounds-at-cap", "final at cap");
    expect(atCap.run.status).toBe("completed");
    expect(atCap.answers).toEqual(["m1", "m2", "final"]);
  });
});

describe("RUN_MAX_RESULTS", () => {
  it("fails a run at its first line past the cap, duplicates counted, keeping what came before", async () => {
    const { run, answers, ledger } = await runIn("bounds-results", "many duplicates");
    expect([run.status, run.error?.code]).toEqual(["failed", "runner.too_many_results"]);
    expect(run.error?.message).toContain(`more than ${MAX_RESULTS} results (RUN_MAX_RESULTS)`);
    expect(answers).toEqual([]);
    // The first line, then a duplicate warning for each of the next MAX_RESULTS - 1; nothing of the lines after.
    expect(ledger.filter((e) => e.origin === "runner")).toHaveLength(1);
    expect(ledger.filter((e) => e.data.code === "result.duplicate")).toHaveLength(MAX_RESULTS - 1);
    expect(ledger.at(-1)).toMatchObject({ type: "run.failed", origin: "host", data: { code: "runner.too_many_results" } });
  });
});

describe("unknown result types", () => {
  it("warns of each type's first few, then counts the rest in one warning before the run's end", async () => {
    const { run, ledger } = await runIn("bounds-unknown", "unknown types");
    expect(run.status).toBe("completed");
    expect(ledger.filter((e) => e.origin === "runner" && e.type.startsWith("x.")).map((e) => e.type)).toEqual([...Array(UNKNOWN_WARNINGS + 3).fill("x.often"), "x.rare"]);
    const warned = ledger.filter((e) => e.data.code === "result.unknown_type");
    expect(warned.filter((e) => e.data.message === "unknown result type x.often ignored")).toHaveLength(UNKNOWN_WARNINGS);
    expect(warned.filter((e) => e.data.message === "unknown result type x.rare ignored")).toHaveLength(1);
    expect(warned.at(-1)?.data).toMatchObject({ suppressed: 3, sequence: null, ledger_seq: null });
    // The count comes before the runner's run.completed, which stays the ledger's last entry.
    expect(ledger.at(-2)).toBe(warned.at(-1));
    expect(ledger.at(-1)).toMatchObject({ type: "run.completed", origin: "runner" });
  });
});

describe("one state budget for state.set calls and state.updated results", () => {
  it("refuses the state.set past the cap (429, not retryable), and a state.updated result after it fails the run", async () => {
    const { run } = await runIn("bounds-sets", "sets then result");
    const answers = setAnswers.get(run.run_id)!;
    expect(answers.slice(0, CAP).map((a) => a.status)).toEqual([200, 200, 200]);
    expect(answers[CAP].status).toBe(429);
    expect(answers[CAP].body.error).toMatchObject({ code: "rate_limited", retryable: false, details: { limit: CAP } });
    expect(answers[CAP].body.error.message).toContain("RUN_MAX_STATE_UPDATES");
    expect([run.status, run.error?.code]).toEqual(["failed", "runner.too_many_state_updates"]);
    expect(await stateKeys("a-")).toEqual(["a-set1", "a-set2", "a-set3"]);
  });

  it("refuses a state.set once the run's state.updated results took the budget", async () => {
    const { run } = await runIn("bounds-results-first", "results then set");
    expect(run.status).toBe("completed");
    const [late] = setAnswers.get(run.run_id)!;
    expect([late.status, late.body.error?.code]).toEqual([429, "rate_limited"]);
    expect(await stateKeys("b-")).toEqual(["b-res1", "b-res2", "b-res3"]);
  });
});
