/**
 * Slack's auth.test for a bot token of workspace T1 (its bot user UBOT), as Slack answers it (it names no app): the
 * installation the host pins a bot to, the one the tests' envelopes name.
 */
export const SLACK_AUTH_TEST = { ok: true, url: "https://acme.slack.com/", team: "Acme", user: "agent", team_id: "T1", user_id: "UBOT", bot_id: "B1", is_enterprise_install: false };

/** Slack's revisions of a person's (U42's) message `ts`, as its Events API sends them; `eventTs` is the event's own ts. */

/** `message_changed` for an edit made at `editedAt` (its version). */
export const slackEdit = (channel: string, ts: string, text: string, editedAt: string, eventTs: string) => ({
  type: "message",
  subtype: "message_changed",
  hidden: true,
  channel,
  ts: eventTs,
  message: { type: "message", user: "U42", text, ts, edited: { user: "U42", ts: editedAt } },
  previous_message: { type: "message", user: "U42", text: "before", ts },
});

/** `message_deleted`. */
export const slackDeletion = (channel: string, ts: string, eventTs: string) => ({ type: "message", subtype: "message_deleted", hidden: true, channel, ts: eventTs, deleted_ts: ts, previous_message: { type: "message", user: "U42", ts, text: "gone" } });
