/**
 * A Slack message's text as a runner reads it. Slack's `text` is markup: `<@U123>` mentions, `<#C1|general>` channel
 * links, `<!here>` special mentions, `<https://x|label>` links, and `& < >` sent as entities. The runner gets words
 * instead (README, "Platform input"); `event.data.raw_text` keeps the markup as sent.
 */
import { unescapeSlackText } from "./text";

/** Mentions Slack writes `<!here>`: shown as a person typed them. */
const BROADCASTS = new Set(["here", "channel", "everyone"]);

/** `https://example.com/` and `example.com`, `mailto:a@b.c` and `a@b.c`: a label that is its link says it all. */
const bare = (s: string) => s.replace(/^(https?:\/\/|mailto:)/i, "").replace(/\/$/, "");

/** One `<…>` of Slack's markup (its inside given, entities still encoded) as words. */
function readableToken(inside: string): string {
  const bar = inside.indexOf("|");
  const target = unescapeSlackText(bar < 0 ? inside : inside.slice(0, bar));
  const label = bar < 0 ? "" : unescapeSlackText(inside.slice(bar + 1));
  // A user, `<@U123>`: Slack names no one in the text (the legacy `<@U123|ada>` does), and the id is what `actor_id` says.
  if (target.startsWith("@")) return `@${label || target.slice(1)}`;
  if (target.startsWith("#")) return `#${label || target.slice(1)}`;
  if (target.startsWith("!")) {
    const [name, ...args] = target.slice(1).split("^");
    if (BROADCASTS.has(name)) return `@${name}`;
    // A user group (`<!subteam^S1|@devs>`), a date (`<!date^…|Feb 18>`): its label is how Slack shows it.
    return label || `@${args[0] ?? name}`;
  }
  // A link: its label with the target after it, as Telegram's and Lark's links read; a link Slack made of typed text is that text.
  if (!label) return target;
  return bare(label) === bare(target) ? label : `${label} (${target})`;
}

/** One mention of those a message starts with, and the `,` `:` and spaces after it: a user's, `<!here>`, a user group. */
const LEADING_MENTION = /^<(@[^|>]+|!(?:here|channel|everyone|subteam\^[^|>]*))(?:\|[^>]*)?>[\s,:]*/;

/**
 * The text without the bot's own mentions among those it starts with (`ownUserIds`: the bot user the envelope's
 * authorizations name), so "<@UBOT> what's new?" reads "what's new?" and "<@U1> <@UBOT> what's new?" reads
 * "@U1 what's new?"; as sent when nothing follows those mentions, so a bare ping still says the bot was called.
 */
function withoutOwnLeadingMentions(text: string, ownUserIds: readonly string[]): string {
  let rest = text.trimStart();
  let kept = "";
  let ours = false;
  for (let m = LEADING_MENTION.exec(rest); m; m = LEADING_MENTION.exec(rest)) {
    if (m[1].startsWith("@") && ownUserIds.includes(m[1].slice(1))) ours = true;
    else kept += m[0];
    rest = rest.slice(m[0].length);
  }
  return ours && rest ? kept + rest : text;
}

/** The text in words (README, "Platform input"), the bot's own leading mentions left out. */
export function readableSlackText(text: string, ownUserIds: readonly string[]): string {
  const said = withoutOwnLeadingMentions(text, ownUserIds);
  let out = "";
  let at = 0;
  for (const token of said.matchAll(/<([^<>]*)>/g)) {
    out += unescapeSlackText(said.slice(at, token.index)) + readableToken(token[1]);
    at = token.index + token[0].length;
  }
  return out + unescapeSlackText(said.slice(at));
}
