/**
 * Which installation of its platform app a bot is known to be, as its admin view shows it (README, Slack's "One app in
 * several workspaces"): what the platform said and when, or why it is not known yet. Never the credentials' digest nor
 * the key lookups find the installation by. Only for a platform whose adapter shows one (Slack's): the other
 * platforms' views leave both fields out, as they leave out any field that is not theirs.
 */
import { iso } from "../lib/json";
import { ADAPTERS } from "../platforms/registry";
import { isPlatform } from "../platforms/types";
import { credentialsMarked } from "./bot-digests";
import { installationIn, keptOf, type Unanswered } from "./bot-installation";
import type { BotRow } from "./bots";

/**
 * Why the installation is not known: never asked (of these credentials); asked, and the platform gave no answer (asked
 * again); it refused the token (not asked again by the cron until the credentials change, by a request for a while);
 * the credentials could not be opened under the host's keys, or read as the platform's, when last tried.
 */
export type InstallationUnknownReason = "not_asked" | "no_answer" | "token_refused" | "credentials_unopenable" | "credentials_unreadable";

export interface InstallationView {
  /** What the platform said (null: not known), and when it was learned (null: kept by a release that kept no time). */
  installation?: (Record<string, unknown> & { learned_at: string | null }) | null;
  /** Only while `installation` is null; `at`: when that was found, where it is kept. */
  installation_unknown?: { reason: InstallationUnknownReason; at?: string };
}

export async function installationView(row: BotRow): Promise<InstallationView> {
  const adapter = isPlatform(row.platform) ? ADAPTERS[row.platform] : undefined;
  if (!adapter?.installationShown) return {};
  const kept = await keptOf(row);
  const installation = installationIn(kept);
  const shown = installation && adapter.installationShown(installation);
  if (shown) return { installation: { ...shown, learned_at: typeof kept?.learned_at === "number" ? iso(kept.learned_at)! : null } };
  return { installation: null, installation_unknown: unknownBecause(row, kept?.unanswered) };
}

function unknownBecause(row: BotRow, unanswered: Partial<Unanswered> | undefined): NonNullable<InstallationView["installation_unknown"]> {
  const at = typeof unanswered?.at === "number" ? iso(unanswered.at) : undefined;
  if (at !== undefined && unanswered?.refused === true) return { reason: "token_refused", at };
  if (at !== undefined && (unanswered?.cause === "unopenable" || unanswered?.cause === "unreadable")) return { reason: `credentials_${unanswered.cause}`, at };
  // Kept by the digest's marker, which keeps no time: a lookup or the cron found them so.
  const marked = credentialsMarked(row.appSecretDigest);
  if (marked !== null) return { reason: `credentials_${marked}` };
  return at !== undefined ? { reason: "no_answer", at } : { reason: "not_asked" };
}
