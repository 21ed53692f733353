/**
 * An app installed only to a user (not to the server it is used in) may post at most 5 follow-up messages per
 * interaction, and its bot is no member of that server or DM to post there otherwise: the deferred response and 5
 * follow-ups are all an answer can take. Past them, the last message shown says the rest was cut (a part of it making room),
 * so the answer never just stops mid-way; the refused sends are recorded.
 */
import { splitMessage } from "../split";
import type { ApiFailure } from "../types";

/** Characters per message. */
export const DISCORD_MAX_CONTENT = 2000;
/** Follow-up messages Discord takes per interaction of an app installed only to the user. */
export const USER_INSTALL_FOLLOWUPS = 5;
/** Discord's refusal of a follow-up past that limit. */
export const MAX_FOLLOWUPS_CODE = 40094;

/** `authorizing_integration_owners` keys: the app installed to the server (or DM with its bot), or to the user. */
const GUILD_INSTALL = "0";
const USER_INSTALL = "1";

export const FOLLOWUP_CUT_NOTICE = `(Discord lets this app post only ${USER_INSTALL_FOLLOWUPS + 1} messages in reply here: the rest of this answer was cut.)`;

/** The follow-ups an interaction may have: limited when only the user installed the app (Discord's docs). */
export function followupLimitOf(owners: Record<string, unknown> | undefined): number | undefined {
  return owners && USER_INSTALL in owners && !(GUILD_INSTALL in owners) ? USER_INSTALL_FOLLOWUPS : undefined;
}

/** A message's text ending with the notice, cut (as a reply is split: code blocks closed) to leave room for it. */
export function withCutNotice(text: string): string {
  if (!text.trim()) return FOLLOWUP_CUT_NOTICE;
  const room = DISCORD_MAX_CONTENT - FOLLOWUP_CUT_NOTICE.length - 2;
  const kept = text.length <= room ? text : splitMessage(text, room)[0];
  return `${kept.trimEnd()}\n\n${FOLLOWUP_CUT_NOTICE}`;
}

/**
 * One reply's follow-ups counted against the limit, and the last message it showed (where the notice goes). Once the
 * notice is on a message, later edits of that message keep it.
 */
export class FollowupBudget {
  private posted = 0;
  private last: { id: string; text: string } | null = null;
  private noticeOn: string | null = null;
  private closed = false;

  constructor(private readonly limit: number | undefined) {}

  /** No follow-up may be posted any more. */
  get spent(): boolean {
    return this.closed || (this.limit !== undefined && this.posted >= this.limit);
  }

  /** Discord refused a follow-up for the limit: no more are tried. */
  close(): void {
    this.closed = true;
  }

  /** A message shown by a send: the deferred response's first answer, or a follow-up (`followup`). */
  shown(id: string, text: string, followup: boolean): void {
    if (followup) this.posted++;
    this.last = { id, text };
  }

  /** The text an edit of message `id` sends: what was asked, with the notice if the message carries it. */
  editing(id: string, text: string): string {
    if (this.last?.id === id) this.last.text = text;
    return this.noticeOn === id ? withCutNotice(text) : text;
  }

  /** The edit that puts the notice on the last message shown, or null when it is there already (or nothing was shown). */
  noticeEdit(): { id: string; text: string } | null {
    return this.last && this.noticeOn !== this.last.id ? { id: this.last.id, text: this.last.text } : null;
  }

  noticed(id: string): void {
    this.noticeOn = id;
  }
}

/** What a send past the limit answers: recorded as refused for good (the notice says so in the chat). */
export function followupLimitFailure(status: number | null): { ok: false; failure: ApiFailure } {
  const message = `Discord takes at most ${USER_INSTALL_FOLLOWUPS} follow-up messages per interaction of an app installed to a user; not shown (the last message shown says the rest was cut)`;
  return { ok: false, failure: { kind: "permanent", status, code: "discord_followup_limit", message } };
}
