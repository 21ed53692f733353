/**
 * Which installation of a Slack app a request is for, and whether that is the bot's. An app has one signing secret
 * however many workspaces it is installed in: registered as two bots (its installations in two workspaces), a request
 * Slack signed for one passes the other's signature check. Each bot is the installation its own token is (Slack's
 * auth.test, ./own-installation.ts); a request naming another is not its to take.
 *
 * What a request names is read as Slack's own Bolt reads it to find the installation: an event by its
 * `authorizations` (the installation it was sent for; in a channel shared with another organization the envelope's
 * `team_id` and `enterprise_id` may be that one's), else its `team_id`; a slash command by its `team_id`; an
 * interactivity payload by the view's `app_installed_team_id`, else `team.id`, else the user's `team_id`. An org-wide
 * install (Enterprise Grid) is one installation across the organization's workspaces: its requests name the
 * workspace, and it is known by its `enterprise_id`. Each request also says whether it is for an org-wide install
 * (`is_enterprise_install`), which is compared too: where its fields name the user's organization rather than the
 * installation's (a shared channel's), that says which kind of installation it was sent for.
 */
import * as z from "zod";
import { asRecord } from "../http";
import { namedId } from "../verify";

/** The bot's installation as auth.test gave it: its workspace, or its organization when installed org-wide; its app. */
export const SlackInstallationSchema = z.object({
  team_id: z.string().nullable(),
  enterprise_id: z.string().nullable(),
  enterprise_install: z.boolean(),
  app_id: z.string().nullable(),
});
export type SlackInstallation = z.infer<typeof SlackInstallationSchema>;

/** The installation a request names; a field it leaves out (or sends empty or null) is undefined. */
export interface NamedInstallation {
  teamId?: string;
  enterpriseId?: string;
  /** Whether it is for an org-wide install (`is_enterprise_install`), when it says. */
  enterpriseInstall?: boolean;
  appId?: string;
}

const id = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);
/** A JSON boolean, or a form field's "true" / "false". */
const flag = (v: unknown): boolean | undefined => (typeof v === "boolean" ? v : v === "true" ? true : v === "false" ? false : undefined);

/** An Events API envelope (event_callback, app_rate_limited, ...). */
export function namedByEnvelope(body: Record<string, unknown>): NamedInstallation {
  const appId = id(body.api_app_id);
  const first = Array.isArray(body.authorizations) && body.authorizations[0] !== undefined ? asRecord(body.authorizations[0]) : null;
  if (first === null) return { teamId: id(body.team_id), enterpriseId: id(body.enterprise_id), appId };
  // The installation is the authorization's, its organization included: a null one is a workspace of none, never the
  // envelope's `enterprise_id` (in a shared channel, the organization the event came from). Its team is null for an
  // org-wide install, known by its organization: the envelope's team then (as Bolt reads it).
  return { teamId: id(first.team_id) ?? id(body.team_id), enterpriseId: id(first.enterprise_id), enterpriseInstall: flag(first.is_enterprise_install), appId };
}

/** A slash command's form fields. */
export const namedByCommand = (fields: Record<string, string>): NamedInstallation => ({
  teamId: id(fields.team_id),
  enterpriseId: id(fields.enterprise_id),
  enterpriseInstall: flag(fields.is_enterprise_install),
  appId: id(fields.api_app_id),
});

/** An interactivity payload (a press, a shortcut, a view). */
export function namedByPayload(payload: Record<string, unknown>): NamedInstallation {
  const team = asRecord(payload.team);
  return {
    teamId: id(asRecord(payload.view).app_installed_team_id) ?? id(team.id) ?? id(asRecord(payload.user).team_id),
    enterpriseId: id(asRecord(payload.enterprise).id) ?? id(team.enterprise_id),
    enterpriseInstall: flag(payload.is_enterprise_install),
    appId: id(payload.api_app_id),
  };
}

/**
 * Why a request is not for the bot installed so, or null when it is. A request naming no installation at all passes:
 * every request Slack signs names its team (but `url_verification` and a slash command's `ssl_check`, which ask for
 * nothing), so a request signed for another installation always names that one. The app is compared once known.
 */
export function otherInstallation(bot: SlackInstallation, named: NamedInstallation): string | null {
  if (named.teamId !== undefined || named.enterpriseId !== undefined) {
    if (bot.enterprise_install && named.enterpriseId !== bot.enterprise_id) return `the request names ${shown("Slack organization", named.enterpriseId)}, not this bot's (${bot.enterprise_id}, installed organization-wide)`;
    if (!bot.enterprise_install && named.teamId !== bot.team_id) return `the request names ${shown("Slack workspace", named.teamId)}, not this bot's (team ${bot.team_id})`;
  }
  // The same organization or workspace named, but for the other kind of installation (its fields may name the user's).
  if (named.enterpriseInstall !== undefined && named.enterpriseInstall !== bot.enterprise_install) {
    return named.enterpriseInstall
      ? `the request is for an organization-wide installation (${shown("Slack organization", named.enterpriseId)}), not this bot's (team ${bot.team_id})`
      : `the request is for a workspace's installation (${shown("Slack workspace", named.teamId)}), not this bot's (${bot.enterprise_id}, installed organization-wide)`;
  }
  if (bot.app_id !== null && named.appId !== undefined && named.appId !== bot.app_id) return `the request names Slack app ${namedId(named.appId)}, not this bot's (${bot.app_id})`;
  return null;
}

const shown = (what: string, given: string | undefined) => (given === undefined ? `no ${what}` : `${what} ${namedId(given)}`);

/** The key an installation is looked up by (src/stores/bot-siblings.ts): its organization when installed org-wide, else its workspace. */
export function installationKeyOf(installation: SlackInstallation): string | null {
  if (installation.enterprise_install) return installation.enterprise_id === null ? null : `enterprise:${installation.enterprise_id}`;
  return installation.team_id === null ? null : `team:${installation.team_id}`;
}

/** The keys of the installations a request naming these may be for: its workspace's, or its organization's org-wide one. */
export const installationKeysNamed = (named: NamedInstallation): string[] => [
  ...(named.teamId === undefined ? [] : [`team:${named.teamId}`]),
  ...(named.enterpriseId === undefined ? [] : [`enterprise:${named.enterpriseId}`]),
];

/** A kept installation as the bot's admin view shows it, in Slack's own words (`is_enterprise_install`); null when it is not one. */
export function installationShown(kept: Record<string, unknown>): Record<string, unknown> | null {
  const installation = SlackInstallationSchema.safeParse(kept);
  if (!installation.success) return null;
  const { team_id, enterprise_id, enterprise_install, app_id } = installation.data;
  return { team_id, enterprise_id, is_enterprise_install: enterprise_install, app_id };
}
