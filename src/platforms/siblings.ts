/**
 * Bots registered for other installations of one platform app. Slack calls one Request URL per app, whichever
 * workspace a request is for: a request the bot at that address refuses as another installation's is handed to the
 * bot registered for that one (PlatformAdapter.siblingFor), found by the app's shared secret and its installation
 * (src/stores/bot-siblings.ts), and read by it as at its own address.
 */
import type { Bot, WebhookInstallation } from "./types";

/** Another bot of the platform sharing the app's secret, as its row keeps it: its credentials opened only when asked. */
export interface SiblingBot {
  botId: string;
  /**
   * Its installation as kept (null: not known yet); `installation.pin` keeps what the platform says of it, and
   * `installation.keepRefused` that the platform refused its credentials.
   */
  pinned: Record<string, unknown> | null;
  installation: WebhookInstallation;
  /** The bot with its credentials opened (once); null when its platform cannot read them. Rejects when they cannot be opened (SECRETS_KEY). */
  open(): Promise<Bot | null>;
}

export interface SiblingDirectory {
  /**
   * The other bots of the platform registered with `appSecret` whose installation is kept under one of
   * `installationKeys` or not known yet, in registration order. `complete` is false when bots were left unread (more
   * than one lookup reads), one of which may be the one.
   */
  sharing(appSecret: string, installationKeys: string[]): Promise<{ bots: SiblingBot[]; complete: boolean }>;
}

/** The bot a request is handed to, and its installation, which the request read by it is checked against. */
export interface HandedOver<C = Record<string, string>> {
  bot: Bot<C>;
  installation: WebhookInstallation;
}
