import type { ServerResponse } from "node:http";
import { callHostApi, keyedGates } from "./host-api";
import { resultWriter, startAdHocRunner, type RunCall } from "./runner";

/**
 * A runner service for chaos tests: what each run does is named by its event's text, `{behaviour} {event_id}`, and
 * each behaviour comes with what the host should make of it (README "Writing a runner": the failure codes, drops,
 * duplicates and gaps). Only "good" runs write state; every other write a behaviour tries must not land.
 */
export const BEHAVIOURS = [
  "good",
  "good_deltas",
  "crash",
  "crash_mid_line",
  "crash_before_answer",
  "crash_after_message",
  "hang",
  "garbage",
  "oversize",
  "flood",
  "non2xx",
  "liar_sequence",
  "liar_schema",
  "liar_after_terminal",
  "liar_other_run",
  "thief",
] as const;
export type Behaviour = (typeof BEHAVIOURS)[number] | "final";

/** What the host should record of a run: its end, its assistant Transcript items in order, the state keys it wrote. */
export interface Expected {
  status: "completed" | "failed" | "timeout";
  code?: string;
  assistant: string[];
  stateKeys: string[];
}

/** The limits the chaos host runs with (RUNNER_MAX_LINE_BYTES, RUN_MAX_RESULTS), which oversize and flood go past. */
export const CHAOS_LIMITS = { lineBytes: 64 * 1024, results: 500 };

export const answerOf = (eventId: string) => `answer to ${eventId}`;
const FINAL_ANSWER = "reported";

export function expectedOf(behaviour: Behaviour, eventId: string): Expected {
  const answer = [answerOf(eventId)];
  const failed = (code: string, assistant: string[] = []): Expected => ({ status: "failed", code, assistant, stateKeys: [] });
  switch (behaviour) {
    case "good":
      return { status: "completed", assistant: answer, stateKeys: [`set.${eventId}`, `upd.${eventId}`] };
    case "good_deltas":
      // The answer streamed as deltas that no message completed is the run's message when run.completed ends it.
      return { status: "completed", assistant: answer, stateKeys: [`upd.${eventId}`] };
    case "crash":
    case "crash_mid_line":
      // A connection dropped mid-body is no clean end: the half line it cut is not read as the last one.
      return failed("runner.stream_closed");
    case "crash_before_answer":
      return failed("runner.unreachable");
    case "crash_after_message":
      // A message completed before the crash is recorded all the same.
      return failed("runner.stream_closed", answer);
    case "hang":
      return { status: "timeout", code: "deadline_exceeded", assistant: [], stateKeys: [] };
    case "garbage":
    case "liar_other_run":
      return failed("runner.protocol_error");
    case "oversize":
      return failed("runner.line_too_large");
    case "flood":
      return failed("runner.too_many_results");
    case "non2xx":
      return failed("runner.http_error");
    case "liar_sequence":
    case "liar_schema":
    case "liar_after_terminal":
    case "thief":
      // Gaps are warned of, duplicates and invalid payloads dropped, lines after the terminal one never read; the
      // thief's calls are refused; each run goes on to its own end.
      return { status: "completed", assistant: answer, stateKeys: [] };
    case "final":
      return { status: "completed", assistant: [FINAL_ANSWER], stateKeys: [] };
  }
}

/** What a run's runner saw of the host, for the test to check once everything has ended. */
export interface RunSeen {
  runId: string;
  eventId: string;
  behaviour: Behaviour;
  conversation: string;
  token: string;
  /** Its request still open: the liar and the thief pick such a run first. */
  live: boolean;
  /** Items of another conversation a good run's history.page gave it (0), and whether its own message was there. */
  historyForeign?: number;
  historyHadOwn?: boolean;
  /** The status of each Host API call that should have been refused (a thief's, a hung run's after its deadline). */
  refusedStatuses?: number[];
  /** The run a liar named in its forged line, or whose token a thief used. */
  victim?: string;
  /** The events a good run's steering.pull gave it. */
  pulled?: string[];
  /** The status of each Host API call that should have been accepted. */
  acceptedStatuses?: number[];
  /** The final run's report: its history (forward) and its conversation's state keys. */
  report?: { history: { role: string; content?: string; event_id: string; conversation_id?: string }[]; keys: string[] };
}

type Api = ReturnType<typeof apiOf>;
/** `ctx` is the AgentRunContext as the runner got it, parsed JSON: read field by field, as a runner would. */
const apiOf = (ctx: any) => (action: string, params: Record<string, unknown>, as: { runId?: string; token?: string } = {}) =>
  callHostApi(ctx.runtime.api.base_url, as.runId ?? ctx.run_id, as.token ?? ctx.runtime.api.token, action, params);

interface Act {
  /** The AgentRunContext as the runner got it (parsed JSON). */
  ctx: any;
  eventId: string;
  res: ServerResponse;
  w: ReturnType<typeof resultWriter>;
  api: Api;
  seen: RunSeen;
  /** A run of another conversation, one still live if there is one (waited for a moment if none has begun yet): the liar's and the thief's victim. */
  other: () => Promise<RunSeen | undefined>;
}

const line = (runId: string, type: string, data: unknown, sequence?: number) => `${JSON.stringify({ run_id: runId, type, data, ...(sequence === undefined ? {} : { sequence }) })}\n`;
const delta = (content: string) => ({ chunk: { role: "assistant", content } });
const message = (content: string) => ({ message: { role: "assistant", content } });
const stateWrite = (key: string) => ({ scope: "conversation", key, value: { key } });
const finish = { finish_reason: "stop" };

/** Writes `text` and resolves once it is handed to the kernel, so a crash after it loses none of it. */
const flushed = (res: ServerResponse, text: string) => new Promise<void>((done) => res.write(text, () => done()));

/** The connection dropped mid-stream, as a runner process that dies does (no chunked terminator). */
async function crash(res: ServerResponse, before: string) {
  await flushed(res, before);
  await new Promise((r) => setTimeout(r, 20));
  res.destroy();
}

const ACTS: Record<Behaviour, (a: Act) => Promise<void>> = {
  async good({ ctx, eventId, res, w, api, seen }) {
    w.send("message.delta", delta("answer "));
    const history = await api("history.page", { limit: 100 });
    const items: any[] = history.body.data?.items ?? [];
    seen.historyForeign = items.filter((i) => i.conversation_id !== ctx.conversation.conversation_id).length;
    seen.historyHadOwn = items.some((i) => i.role === "user" && i.event_id === eventId);
    const set = await api("state.set", stateWrite(`set.${eventId}`));
    seen.acceptedStatuses = [history.status, set.status];
    // A steering run takes the messages claimed meanwhile at its turn boundary (README "Steering").
    seen.pulled = [];
    if (ctx.context.available_apis?.steering_pull === true) {
      const pulled = await api("steering.pull", {});
      seen.acceptedStatuses.push(pulled.status);
      seen.pulled = (pulled.body.data?.items ?? []).map((i: any) => i.event.event_id);
    }
    w.send("state.updated", stateWrite(`upd.${eventId}`));
    w.send("message.delta", delta(`to ${eventId}`));
    w.send("message.completed", message(answerOf(eventId)));
    w.send("run.completed", finish);
    res.end();
  },
  async good_deltas({ eventId, res, w }) {
    for (const part of answerOf(eventId).split(/(?= )/)) w.send("message.delta", delta(part));
    w.send("state.updated", stateWrite(`upd.${eventId}`));
    w.send("run.completed", finish);
    res.end();
  },
  async crash({ ctx, res }) {
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    await crash(res, line(ctx.run_id, "message.delta", delta("half an ans"), 1));
  },
  async crash_mid_line({ ctx, res }) {
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    await crash(res, line(ctx.run_id, "message.delta", delta("half an ans"), 1) + line(ctx.run_id, "message.completed", message("cut"), 2).slice(0, 60));
  },
  async crash_before_answer({ res }) {
    res.socket?.destroy();
  },
  async crash_after_message({ ctx, eventId, res }) {
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    await crash(res, line(ctx.run_id, "message.delta", delta("answer"), 1) + line(ctx.run_id, "message.completed", message(answerOf(eventId)), 2));
  },
  async hang({ eventId, res, w, api, seen }) {
    w.send("message.delta", delta("thinking"));
    // Nothing more until the host lets go at the deadline; then the run's token is dead.
    await new Promise<void>((done) => (res.destroyed ? done() : res.once("close", () => done())));
    seen.refusedStatuses = [(await api("state.set", stateWrite(`late.${eventId}`))).status];
  },
  async garbage({ ctx, eventId, res }) {
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    const rest = line(ctx.run_id, "state.updated", stateWrite(`garbage.${eventId}`), 2) + line(ctx.run_id, "message.completed", message("after garbage"), 3) + line(ctx.run_id, "run.completed", finish, 4);
    res.end(`${line(ctx.run_id, "message.delta", delta("fine so far"), 1)}this is not json\n${rest}`);
  },
  async oversize({ ctx, eventId, res }) {
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    const huge = line(ctx.run_id, "message.completed", message("x".repeat(CHAOS_LIMITS.lineBytes + 1024)), 2);
    res.end(line(ctx.run_id, "message.delta", delta("fine so far"), 1) + huge + line(ctx.run_id, "state.updated", stateWrite(`oversize.${eventId}`), 3) + line(ctx.run_id, "run.completed", finish, 4));
  },
  async flood({ ctx, eventId, res }) {
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    const lines: string[] = [];
    for (let i = 1; i <= CHAOS_LIMITS.results * 4; i++) lines.push(line(ctx.run_id, "message.delta", delta("x"), i));
    const n = lines.length;
    lines.push(line(ctx.run_id, "state.updated", stateWrite(`flood.${eventId}`), n + 1), line(ctx.run_id, "message.completed", message("after the flood"), n + 2), line(ctx.run_id, "run.completed", finish, n + 3));
    res.end(lines.join(""));
  },
  async non2xx({ eventId, res }) {
    const statuses = [500, 502, 503, 401, 422];
    const status = statuses[[...eventId].reduce((s, c) => s + c.charCodeAt(0), 0) % statuses.length];
    res.writeHead(status, { "content-type": "text/plain" }).end(`refused ${eventId}`);
  },
  async liar_sequence({ ctx, eventId, res }) {
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    const id = ctx.run_id;
    // A gap (2), 2 late (reordered, warned), and a duplicate of 4 saying something else (dropped).
    res.end(
      line(id, "message.delta", delta("answer"), 1) +
        line(id, "message.delta", delta(" to"), 3) +
        line(id, "message.delta", delta(" late"), 2) +
        line(id, "message.completed", message(answerOf(eventId)), 4) +
        line(id, "message.completed", message(`duplicate of ${eventId}`), 4) +
        line(id, "run.completed", finish, 5),
    );
  },
  async liar_schema({ eventId, res, w }) {
    w.send("state.updated", { scope: "galaxy", key: `galaxy.${eventId}`, value: 1 });
    // A key §7 does not list drops a strict payload, however valid the rest.
    w.send("state.updated", { ...stateWrite(`extra.${eventId}`), extra: true });
    w.send("message.completed", { message: 42 });
    w.send("run.completed", {});
    w.send("message.completed", message(answerOf(eventId)));
    w.send("run.completed", finish);
    res.end();
  },
  async liar_after_terminal({ ctx, eventId, res }) {
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    const id = ctx.run_id;
    // All in one write: the lines after run.completed arrive with it, and must not be read.
    res.end(
      line(id, "message.completed", message(answerOf(eventId)), 1) +
        line(id, "run.completed", finish, 2) +
        line(id, "message.completed", message(`after the end of ${eventId}`), 3) +
        line(id, "state.updated", stateWrite(`after.${eventId}`), 4) +
        line(id, "run.failed", { code: "liar.after", error: "said after the end", retryable: false }, 5),
    );
  },
  async liar_other_run({ ctx, eventId, res, other, seen }) {
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    // Another real run's id when there is one: its results must stay its own.
    const victim = (await other())?.runId ?? "run_nobody";
    seen.victim = victim;
    res.end(
      line(ctx.run_id, "message.delta", delta("mine"), 1) +
        line(victim, "message.completed", message(`forged by ${eventId}`), 2) +
        line(ctx.run_id, "state.updated", stateWrite(`forged.${eventId}`), 3) +
        line(ctx.run_id, "message.completed", message("after the forgery"), 4) +
        line(ctx.run_id, "run.completed", finish, 5),
    );
  },
  async thief({ eventId, res, w, api, seen, other, ctx }) {
    const victim = await other();
    seen.victim = victim?.runId;
    const refused: number[] = [];
    // Its own run's route with another run's token, another run's route with its own token, its own token altered: 401.
    if (victim) {
      refused.push((await api("state.set", stateWrite(`stolen.${eventId}`), { token: victim.token })).status);
      refused.push((await api("state.set", stateWrite(`stolen.${eventId}`), { runId: victim.runId })).status);
    }
    refused.push((await api("state.set", stateWrite(`stolen.${eventId}`), { token: `${ctx.runtime.api.token.slice(0, -2)}xx` })).status);
    // With its own token, the victim's conversation is out of its scope: 403.
    if (victim) refused.push((await api("history.page", { conversation_id: victim.conversation })).status);
    seen.refusedStatuses = refused;
    w.send("message.completed", message(answerOf(eventId)));
    w.send("run.completed", finish);
    res.end();
  },
  async final({ res, w, api, seen }) {
    const history = await api("history.page", { limit: 100, direction: "forward" });
    const keys = await api("state.list", { scope: "conversation", limit: 100 });
    seen.acceptedStatuses = [history.status, keys.status];
    seen.report = { history: history.body.data?.items ?? [], keys: keys.body.data?.keys ?? [] };
    w.send("message.completed", message(FINAL_ANSWER));
    w.send("run.completed", finish);
    res.end();
  },
};

/**
 * The chaos runner services, a plain one and one that declares steering, sharing what their runs saw: each run does
 * what its event's text names. A run whose event is `held` waits at its gate before doing anything, so the test can
 * send the next event while its conversation is busy.
 */
export async function startChaosRunners() {
  const runs = new Map<string, RunSeen>();
  const calls: RunCall[] = [];
  const held = new Set<string>();
  const { gate, releaseAll } = keyedGates();
  const start = (name: string, steering: boolean) =>
    startAdHocRunner({
      name,
      runners: [{ name: "default", label: { en_US: name }, capabilities: { streaming: true, steering }, permissions: { history: ["page"] } }],
      async onRun(call: RunCall, res: ServerResponse) {
        calls.push(call);
        const ctx = call.body.context;
        const [behaviour, eventId] = String(ctx.input.text).split(" ") as [Behaviour, string];
        const seen: RunSeen = { runId: ctx.run_id, eventId, behaviour, conversation: ctx.conversation.conversation_id, token: ctx.runtime.api.token, live: true };
        res.on("close", () => (seen.live = false));
        const others = () => [...runs.values()].filter((r) => r.conversation !== seen.conversation);
        const other = async () => {
          for (let waited = 0; others().length === 0 && waited < 5000; waited += 20) await new Promise((r) => setTimeout(r, 20));
          return others().find((r) => r.live) ?? others().at(-1);
        };
        runs.set(ctx.run_id, seen);
        if (held.has(eventId)) await gate(eventId).promise;
        // A write after the host closed the request (it read its terminal result, or gave up) is the runner's loss alone.
        res.on("error", () => {});
        await ACTS[behaviour]({ ctx, eventId, res, w: lazyWriter(res, ctx.run_id), api: apiOf(ctx), seen, other });
      },
    });
  const plain = await start("chaos", false);
  const steerer = await start("chaos-steerer", true);
  return {
    plain,
    steerer,
    runs,
    /** Every run request either service got, in order. */
    calls,
    /** The run of `eventId` will wait at its gate until `release(eventId)`. */
    hold: (eventId: string) => held.add(eventId),
    release: (eventId: string) => gate(eventId).resolve(),
    /** The run a runner was called for with `eventId`'s text, once it has been. */
    runOf: (eventId: string) => [...runs.values()].find((r) => r.eventId === eventId),
    async close() {
      releaseAll();
      await Promise.all([plain.close(), steerer.close()]);
    },
  };
}

/** resultWriter writes its head when made: made on first use, so a behaviour writing raw lines or a status keeps its own head. */
function lazyWriter(res: ServerResponse, runId: string): ReturnType<typeof resultWriter> {
  let writer: ReturnType<typeof resultWriter> | undefined;
  const get = () => (writer ??= resultWriter(res, runId));
  return {
    send: (type, data, seq) => get().send(type, data, seq),
    reply: (content) => get().reply(content),
  };
}
