import { callHostApi, rawHostApi } from "./host-api";
import { messageEvent, type TestHost } from "./host";
import { resultWriter, startAdHocRunner } from "./runner";

export type HostApiAnswer = Awaited<ReturnType<typeof callHostApi>>;
/** A Host API client bound to the run in progress; `runId` / `token` override for misuse tests. */
export type RunApi = (action: string, params?: Record<string, unknown>, as?: { runId?: string; token?: string }) => Promise<HostApiAnswer>;
/** Send one result (e.g. state.updated) on the run's stream before the reply. */
export type EmitResult = (type: string, data: unknown) => void;
/** The raw Host API response (streaming actions, exact bodies). */
export type RawRunApi = (action: string, params?: Record<string, unknown>) => Promise<Response>;
/** Test code executed inside a run, with that run's API and context; what it returns is the run's reply. */
export type RunScript = (api: RunApi, ctx: any, emit: EmitResult, raw: RawRunApi) => Promise<unknown>;

/**
 * A runner service whose runs execute test code: a test registers a script,
 * posts an event whose text names it, and gets back what the script returned
 * (carried as the run's final message). A run with no script echoes its input.
 */
export async function startScriptedRunner(opts: {
  name: string;
  runners?: Record<string, unknown>[];
  /** Sees every run request body and every (non-raw) Host API answer, as text, as the runner got them. */
  observe?: (text: string) => void;
}) {
  const scripts = new Map<string, RunScript>();
  let counter = 0;
  const runner = await startAdHocRunner({
    name: opts.name,
    runners: opts.runners,
    async onRun({ body, raw: request }, res) {
      opts.observe?.(request);
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const script = scripts.get(ctx.input.text);
      if (!script) return w.reply(`echo: ${ctx.input.text ?? ""}`);
      const raw: RawRunApi = (action, params = {}) => rawHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, action, params);
      const api: RunApi = async (action, params = {}, as = {}) => {
        const answer = await rawHostApi(ctx.runtime.api.base_url, as.runId ?? ctx.run_id, as.token ?? ctx.runtime.api.token, action, params);
        const text = await answer.text();
        opts.observe?.(text);
        return { status: answer.status, body: JSON.parse(text) as HostApiAnswer["body"] };
      };
      try {
        w.reply(JSON.stringify((await script(api, ctx, (type, data) => w.send(type, data), raw)) ?? null));
      } catch (err) {
        w.send("run.failed", { code: "test.script_failed", error: String(err), retryable: false });
        res.end();
      }
    },
  });
  return {
    ...runner,
    /** Register this service with the host (its runners become bindable). */
    async register(host: TestHost) {
      const res = await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url });
      if (res.status !== 201) throw new Error(`registering ${runner.url}: ${JSON.stringify(res.body)}`);
    },
    /** Run `script` in a run of `conversationId` and return its result with the run's ids; an `input` in `extra` (attachments) keeps the script's text. */
    async run<T = any>(host: TestHost, conversationId: string, script: RunScript, extra: Record<string, unknown> = {}) {
      const key = `script-${++counter}`;
      scripts.set(key, script);
      const input = extra.input ? { input: { ...(extra.input as Record<string, unknown>), text: key } } : {};
      const posted = await host.postEvent(messageEvent(conversationId, key, { ...extra, ...input }));
      if (!posted.body.run_id) throw new Error(`event for ${conversationId} started no run: ${JSON.stringify(posted.body)}`);
      const run = await host.waitForRun(posted.body.run_id);
      if (run.status !== "completed") throw new Error(`script run ended ${run.status}: ${JSON.stringify(run.error)}`);
      return { result: JSON.parse(String(run.message?.content)) as T, runId: run.run_id, eventId: posted.body.event_id };
    },
  };
}

/** The `host_api.denied` records EventLog holds for one run, oldest first. */
export async function deniedCalls(host: TestHost, runId: string) {
  const rows = await host.query<{ data_json: string }>(
    "SELECT data_json FROM event_log WHERE event_type = 'host_api.denied' AND run_id = ? ORDER BY seq",
    [runId],
  );
  return rows.map((r) => JSON.parse(r.data_json) as { run_id: string; runner_id: string; action: string; resource: Record<string, unknown>; scope: Record<string, unknown>; reason: string });
}

/** Create (or replace) an agent with full control of its policies, through the admin API. */
export async function putAgent(host: TestHost, agent: { agent_id: string; runner_id: string; [k: string]: unknown }) {
  const body = { name: agent.agent_id, event_types: ["message.received"], ...agent };
  const existing = await host.admin("GET", `/v1/admin/agents/${agent.agent_id}`);
  const res = existing.status === 200 ? await host.admin("PUT", `/v1/admin/agents/${agent.agent_id}`, body) : await host.admin("POST", "/v1/admin/agents", body);
  if (res.status >= 300) throw new Error(`agent ${agent.agent_id}: ${JSON.stringify(res.body)}`);
}

/** A run's whole ledger (results and host records), oldest first. */
export async function runLedger(host: TestHost, runId: string): Promise<{ type: string; origin: string; data: any }[]> {
  return (await host.admin("GET", `/v1/runs/${runId}/events?limit=1000`)).body.items;
}
