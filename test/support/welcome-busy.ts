import { afterAll, beforeAll, expect } from "vitest";
import { callHostApi, deferred } from "./host-api";
import { startTestHost, type TestHost } from "./host";
import { resultWriter, startAdHocRunner } from "./runner";

/**
 * A conversation kept busy by another agent's run: a host with one steering runner service (`name`) and two agents
 * of it in `conversation`, "welcome" (a member joining), whose run holds until `releaseWelcome` resolves, and "chat"
 * (messages), with `concurrency`. A message's run calls `onMessage` with its text and a pull of all its steering
 * queue (the pulled texts), then answers `answered <its text>`. Call it once at a file's top level: it registers the
 * file's beforeAll and afterAll (which lets the welcome run go).
 */
export function useWelcomeBusy(opts: {
  name: string;
  conversation: string;
  permissions: Record<string, unknown>;
  concurrency: Record<string, unknown>;
  onMessage: (text: string, pullAll: () => Promise<string[]>) => Promise<void>;
}) {
  const releaseWelcome = deferred();
  // Filled in by beforeAll: the tests read these fields only once it has run.
  const parts = {} as { host: TestHost; runner: Awaited<ReturnType<typeof startAdHocRunner>> };

  beforeAll(async () => {
    parts.runner = await startAdHocRunner({
      name: opts.name,
      runners: [{ name: "default", label: { en_US: "d" }, capabilities: { streaming: true, steering: true }, permissions: opts.permissions }],
      async onRun({ body }, res) {
        const ctx = body.context;
        const w = resultWriter(res, ctx.run_id);
        if (ctx.event.event_type === "group.member_joined") {
          await releaseWelcome.promise;
          return w.reply("welcome");
        }
        const pullAll = async (): Promise<string[]> => {
          const r = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" });
          return (r.body.data?.items ?? []).map((i: { input: { text: string } }) => i.input.text);
        };
        await opts.onMessage(ctx.input.text, pullAll);
        w.reply(`answered ${ctx.input.text}`);
      },
    });
    const host = (parts.host = await startTestHost());
    const runnerId = parts.runner.runnerId();
    expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: parts.runner.url })).status).toBe(201);
    const scope = { type: "conversation", id: opts.conversation };
    expect((await host.admin("POST", "/v1/admin/agents", { agent_id: "welcome", name: "welcome", runner_id: runnerId, event_types: ["group.member_joined"], scope })).status).toBe(201);
    expect((await host.admin("POST", "/v1/admin/agents", { agent_id: "chat", name: "chat", runner_id: runnerId, event_types: ["message.received"], scope, concurrency: opts.concurrency })).status).toBe(201);
  });
  afterAll(async () => {
    releaseWelcome.resolve();
    await parts.host?.dispose();
    await parts.runner?.close();
  });

  return Object.assign(parts, {
    releaseWelcome,
    /** A member joining the conversation: the welcome agent's run starts, and holds. */
    memberJoins: () => parts.host.postEvent({ event_type: "group.member_joined", conversation_id: opts.conversation, actor: { actor_type: "user", actor_id: "u2" } }),
  });
}
