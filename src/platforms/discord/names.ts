/**
 * Users, roles and channels an interaction names by id (a command's user, channel, role or mentionable option; a
 * select menu's picks), as the runner reads them: as the server shows them (`@nickname`, `@Role`, `#channel`), since
 * a bare snowflake means nothing to whoever reads the text. The ids stay in `event.data`. One Discord did not
 * resolve is its mention markup (`<@id>`), still recognisably a user, role or channel.
 */
import * as z from "zod";
import { nullAsAbsent } from "../payload";

export const UserSchema = z.looseObject({ id: z.string(), username: nullAsAbsent(z.string()), global_name: z.string().nullish(), bot: nullAsAbsent(z.boolean()) });
type User = z.infer<typeof UserSchema>;

/** What `data.resolved` says of the users, members, roles and channels the interaction names (each field may be left out). */
export const ResolvedNamesShape = {
  users: nullAsAbsent(z.record(z.string(), UserSchema)),
  members: nullAsAbsent(z.record(z.string(), z.looseObject({ nick: z.string().nullish() }))),
  roles: nullAsAbsent(z.record(z.string(), z.looseObject({ name: z.string().nullish() }))),
  channels: nullAsAbsent(z.record(z.string(), z.looseObject({ name: z.string().nullish() }))),
};
type ResolvedNames = { [K in keyof typeof ResolvedNamesShape]?: z.infer<(typeof ResolvedNamesShape)[K]> };

type Named = "user" | "role" | "channel" | "mentionable";
/** Application command option types that carry an id. */
const OPTION_KINDS: Record<number, Named> = { 6: "user", 7: "channel", 8: "role", 9: "mentionable" };
/** Select menu component types whose values are ids (in messages and in modals alike). */
const SELECT_KINDS: Record<number, Named> = { 5: "user", 6: "role", 7: "mentionable", 8: "channel" };

export const optionKind = (type: number): Named | undefined => OPTION_KINDS[type];
export const selectKind = (type: number | undefined): Named | undefined => (type === undefined ? undefined : SELECT_KINDS[type]);

/** A user's name as Discord shows it: their display name, else their username. */
export const userName = (u: User) => u.global_name ?? u.username ?? null;

/** A user's name as a server shows it: the member's nickname there first. */
export const memberName = (u: User, nick: string | null | undefined) => nick || userName(u);

/** One id as the text shows it. */
export function nameOf(kind: Named, id: string, resolved: ResolvedNames | undefined): string {
  const user = kind === "user" || kind === "mentionable" ? resolved?.users?.[id] : undefined;
  const shown = user && memberName(user, resolved?.members?.[id]?.nick);
  if (shown) return `@${shown}`;
  const role = kind === "role" || kind === "mentionable" ? resolved?.roles?.[id]?.name : undefined;
  // The @everyone role is named with its "@" already.
  if (role) return role.startsWith("@") ? role : `@${role}`;
  const channel = kind === "channel" ? resolved?.channels?.[id]?.name : undefined;
  if (channel) return `#${channel}`;
  return kind === "channel" ? `<#${id}>` : kind === "role" ? `<@&${id}>` : `<@${id}>`;
}
