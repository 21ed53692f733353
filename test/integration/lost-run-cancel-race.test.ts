import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalHost } from "../../local/host";
import { adminCall, bindRunner } from "../../local/setup";
import { startHostOn, waitForRunOn } from "../support/host";
import { deferred } from "../support/host-api";
import { sayOnTelegram, startFakePlatform, telegramBotApi, waitFor } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { useDataDir } from "../support/restart-host";

/**
 * README: a run lost with an earlier instance ends `host.session_lost` (by the watchdog alarm, or by an operator's
 * cancel, which "is not cancelled ... ends host.session_lost"), and its chat is told once that it failed. When the
 * operator's cancel and the watchdog both find the orphan at once, each ends it as lost: one write ends it, the other
 * finds it ended "meanwhile" and replays its ledger into a new reply, so the chat gets the failure notice twice.
 */
const botToken = "123456:TEST-telegram-bot-token-lostrace";
const secretToken = "tg-secret-token-lost-race-cancel";
const dataDir = useDataDir("agent-host-lost-race-");
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
const never = deferred();
const started: string[] = [];
const start = () => startHostOn(dataDir.path, { RUN_WATCHDOG_INTERVAL_MS: "1000" });

beforeAll(async () => {
  fake = await startFakePlatform(telegramBotApi(botToken));
  runner = await startAdHocRunner({
    name: "lostrace",
    async onRun({ body }, res) {
      started.push(body.context.input.text);
      const w = resultWriter(res, body.context.run_id);
      await never.promise;
      w.reply("never");
    },
  });
});
afterAll(async () => {
  never.resolve();
  await runner?.close();
  await fake?.close();
});

describe("an operator's cancel of a lost run while the watchdog ends it", () => {
  it("the chat is told once that the run failed", async () => {
    let host: LocalHost = await start();
    try {
      const created = await adminCall<{ bot_id: string; webhook_url: string }>(host, "POST", "/v1/admin/bots", { platform: "telegram", name: "tg", api_base_url: fake.url, credentials: { bot_token: botToken, secret_token: secretToken } });
      expect(created.status).toBe(201);
      const path = new URL(created.body.webhook_url).pathname;
      await bindRunner(host, { baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "lostrace", scope: { type: "bot", id: created.body.bot_id } });
      expect((await sayOnTelegram(`${host.url}${path}`, secretToken, "6661", "hold on")).status).toBe(200);
      await waitFor(() => started.includes("hold on"), 10_000, "the held run");
      const runId = (await host.query<{ run_id: string }>("SELECT run_id FROM run"))[0].run_id;
      await host.dispose();
      host = await start();
      // The watchdog's end of the orphan takes a while (one Turso round trip in production)...
      host.databaseOutage({ delayMs: 2_500, matching: "the host instance running this run lost its state" });
      await new Promise((r) => setTimeout(r, 1_500));
      // ...and the operator's cancel comes meanwhile.
      const cancel = await adminCall<{ status: string }>(host, "POST", `/v1/runs/${runId}/cancel`);
      expect(cancel.status).toBe(409);
      expect(await waitForRunOn(host, runId, 10_000)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
      await waitFor(() => fake.callsTo(/sendMessage$/).length > 0, 10_000, "a notice");
      await new Promise((r) => setTimeout(r, 3_000));
      const sent = fake.callsTo(/sendMessage$/).map((c) => c.body.text);
      expect(sent).toEqual(["Sorry, I could not answer this time."]);
    } finally {
      await host.dispose();
    }
  });
});
