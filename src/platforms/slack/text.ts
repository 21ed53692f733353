/**
 * Agent text as Slack shows it literally: `&`, `<` and `>` are Slack's control
 * characters, so an answer can never ping `<!channel>`, mention someone or
 * hide a link, and code such as `Vec<String>` is shown as written. Escaped per
 * message part, after splitting, so no entity is cut in two (all of a part's
 * text, or, rendered from Markdown, all but its links: ./mrkdwn.ts).
 */
export const escapeSlackText = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** Inbound message text as the user typed it (Slack escapes the same three characters). */
export const unescapeSlackText = (text: string) => text.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");

/** Slack advises at most 4,000 characters per message, and answers longer ones msg_too_long. */
export const SLACK_MAX_TEXT = 4000;

/** What a character takes of Slack's message size once escaped: `&` goes out as five (`&amp;`), `<` and `>` as four. */
export const slackSentUnits = (code: number) => (code === 0x26 ? 5 : code === 0x3c || code === 0x3e ? 4 : 1);
