import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import type { LocalHost } from "../../local/host";
import { adminCall, bindRunner } from "../../local/setup";
import { addTelegramBot } from "./fake-platform";
import { resultWriter, startAdHocRunner } from "./runner";

/**
 * The data folder of the hosts a test stops and starts again on it (`startHostOn(dataDir.path, …)`): made in the
 * calling file's beforeAll (call this before the file's own), removed in its afterAll, once all else has closed.
 */
export function useDataDir(prefix: string): { readonly path: string } {
  const dir = { path: "" };
  beforeAll(() => void (dir.path = mkdtempSync(join(tmpdir(), prefix))));
  afterAll(() => {
    if (dir.path) rmSync(dir.path, { recursive: true, force: true });
  });
  return dir;
}

/**
 * A runner service `name` whose runs answer `done: <their text>`, those whose text starts with "hold" only once `hold`
 * resolves (for a run a restart loses: never); `started` gets each run's text as it reaches the runner.
 */
export function startHoldingRunner(name: string, hold: Promise<unknown>, started: string[] = []) {
  return startAdHocRunner({
    name,
    async onRun({ body }, res) {
      const ctx = body.context;
      started.push(ctx.input.text);
      const w = resultWriter(res, ctx.run_id);
      if (String(ctx.input.text).startsWith("hold")) await hold;
      w.reply(`done: ${ctx.input.text}`);
    },
  });
}

/**
 * A Telegram bot "tg" on `bot.apiBaseUrl`, bound at bot scope to `agent`, registered with a host `start` starts and
 * stops again: kept in the data folder for every later instance. Answers its id and its webhook's path (each
 * instance has an address of its own).
 */
export async function keepTelegramBot(start: () => Promise<LocalHost>, bot: { apiBaseUrl: string; botToken: string; secretToken: string }, agent: { runner: { url: string; runnerId: () => string }; agentId: string }) {
  const host = await start();
  try {
    const admin = { admin: (method: string, path: string, body?: unknown) => adminCall(host, method, path, body), bind: (opts: Parameters<typeof bindRunner>[1]) => bindRunner(host, opts) };
    const { botId, webhookUrl } = await addTelegramBot(admin, { ...bot, name: "tg" }, agent);
    return { botId, webhookPath: new URL(webhookUrl).pathname };
  } finally {
    await host.dispose();
  }
}
