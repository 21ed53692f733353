import { afterAll, beforeAll, expect } from "vitest";
import { startTestHost, type TestHost } from "./host";
import { startChatRunner, startFakePlatform, type FakeReply, type PlatformCall } from "./fake-platform";
import { expectSecretsKeptOut } from "./secrets-kept-out";

export type FakePlatform = Awaited<ReturnType<typeof startFakePlatform>>;
export type ChatRunner = Awaited<ReturnType<typeof startChatRunner>>;

/** What the calling file's beforeAll starts: read through the object `useChatHost` returns, once that has run. */
export interface ChatHostParts {
  host: TestHost;
  fake: FakePlatform;
  runner: ChatRunner;
  /** The bot `addBot` registered last: its id and webhook address. */
  botId: string;
  webhookUrl: string;
}

/**
 * A fake platform API answered by `api`, a chat runner (`startChatRunner(runnerName)`) and a host capturing its logs:
 * the set-up the chat platform tests share. Call it once at a file's top level: it starts them in the file's
 * beforeAll, then runs `ready` (to register bots and agents), and closes them in its afterAll; each call has its own
 * state. `secrets`: what `keepsSecretsOut` looks for.
 */
export function useChatHost(opts: {
  api: (call: PlatformCall) => FakeReply | Promise<FakeReply>;
  runnerName: string;
  hostOptions?: { storageDrill?: boolean; vars?: Record<string, string>; captureLogs?: boolean };
  secrets?: readonly (string | RegExp)[];
  ready?: () => Promise<void>;
}) {
  // Filled in by beforeAll: the tests read these fields only once it has run.
  const parts = { botId: "", webhookUrl: "" } as ChatHostParts;
  /** Every body the host answered the calling file, to look for secrets. */
  const answered: string[] = [];

  beforeAll(async () => {
    parts.fake = await startFakePlatform(opts.api);
    parts.runner = await startChatRunner(opts.runnerName);
    parts.host = await startTestHost({ captureLogs: true, ...opts.hostOptions });
    await opts.ready?.();
  });
  afterAll(async () => {
    await parts.host?.dispose();
    await parts.runner?.close();
    await parts.fake?.close();
  });

  /**
   * Registers a bot (`POST /v1/admin/bots`), its answer kept among those looked at for secrets, and with `agent`
   * binds that agent of the chat runner to it at bot scope.
   */
  async function addBot(body: Record<string, unknown>, agent?: { agentId: string; eventTypes?: string[] }): Promise<{ botId: string; webhookUrl: string }> {
    const { host, runner } = parts;
    const created = await host.admin("POST", "/v1/admin/bots", body);
    expect(created.status).toBe(201);
    answered.push(JSON.stringify(created.body));
    parts.botId = created.body.bot_id;
    parts.webhookUrl = created.body.webhook_url;
    if (agent) await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: agent.agentId, scope: { type: "bot", id: parts.botId }, eventTypes: agent.eventTypes });
    return { botId: parts.botId, webhookUrl: parts.webhookUrl };
  }

  return Object.assign(parts, {
    answered,
    addBot,
    /** The contexts of the runs started with exactly `text`. */
    contextFor: (text: string) => parts.runner.contexts.filter((c) => c.input.text === text),
    /** The bot's credentials (and tokens the platform gave) in nothing the calling file's host answered, recorded, stored or logged. */
    keepsSecretsOut: () => expectSecretsKeptOut(parts.host, answered, opts.secrets ?? []),
  });
}
export type ChatHost = ReturnType<typeof useChatHost>;
