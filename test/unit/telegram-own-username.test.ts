import { afterEach, describe, expect, it, vi } from "vitest";
import { ownUsername } from "../../src/platforms/telegram/own-username";
import type { TelegramCredentials } from "../../src/platforms/telegram/api";
import type { Bot } from "../../src/platforms/types";
import { startFakePlatform } from "../support/fake-platform";

const HOUR = 60 * 60 * 1000;

describe("a Telegram bot's own username (getMe, kept per isolate)", () => {
  afterEach(() => void vi.useRealTimers());

  it("is asked again after an hour, and a failure then keeps the name it knew", async () => {
    let up = true;
    const api = await startFakePlatform((call) =>
      call.path.endsWith("/getMe") && up ? { json: { ok: true, result: { id: 1, is_bot: true, username: "KeptBot" } } } : { status: 502, json: { ok: false } },
    );
    const bot: Bot<TelegramCredentials> = {
      botId: `tg-kept-${Math.random()}`,
      platform: "telegram",
      name: null,
      workspaceId: null,
      apiBaseUrl: api.url,
      credentials: { bot_token: "123:kept", secret_token: "s".repeat(16) },
      enabled: true,
      registeredAt: 1,
    };
    try {
      // Only Date: the fake's sockets keep their real timers.
      vi.useFakeTimers({ toFake: ["Date"] });
      expect(await ownUsername(bot, 2_000)).toBe("KeptBot");
      expect(await ownUsername(bot, 2_000)).toBe("KeptBot");
      expect(api.calls).toHaveLength(1);
      up = false;
      vi.setSystemTime(Date.now() + HOUR + 1);
      // Telegram is down when the hour is up: the name known is kept, not forgotten (other bots' commands stay unanswered).
      expect(await ownUsername(bot, 2_000)).toBe("KeptBot");
      expect(await ownUsername(bot, 2_000)).toBe("KeptBot");
      expect(api.calls).toHaveLength(2);
      // Asked again a minute later.
      vi.setSystemTime(Date.now() + 60_001);
      expect(await ownUsername(bot, 2_000)).toBe("KeptBot");
      expect(api.calls).toHaveLength(3);
      // Another token is another bot as far as its name goes: nothing known, so null.
      expect(await ownUsername({ ...bot, credentials: { ...bot.credentials, bot_token: "123:other" } }, 2_000)).toBeNull();
      expect(api.calls).toHaveLength(4);
    } finally {
      await api.close();
    }
  });
});
