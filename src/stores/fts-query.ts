import { headOf } from "../lib/text";

/**
 * Turn a runner's free text into an FTS5 MATCH expression that can never be a
 * syntax error: every whitespace-separated word becomes a quoted FTS5 string
 * (so `AND`, `NEAR(`, `col:`, `*`, `"`, `^` are just text), and the words are
 * joined with OR so that BM25 ranks items matching more of them first. A word
 * with punctuation inside (`can't`, `v1.2`) is tokenised by FTS5 into a phrase,
 * and so is a word of a script written without spaces, segmented as the
 * indexed text is (`searchTextOf`): "北京" is the phrase "北 京".
 */

/** More words add little to ranking and make the query slower; the rest are ignored. */
export const MAX_QUERY_TERMS = 32;

// NUL ends an FTS5 string early ("unterminated string"); other control characters are not text either.
const CONTROL_CHARACTERS = /\p{Cc}/gu;
// What the unicode61 tokenizer keeps (letters, numbers, private use); a word without any matches nothing.
const TOKEN_CHARACTER = /[\p{L}\p{N}\p{Co}]/u;

/**
 * Scripts written without spaces between words. The index's tokenizer
 * (unicode61) splits at spaces and punctuation only, so each of their
 * characters is made a word of its own, in the indexed text and the query alike.
 */
const UNSPACED_CHARACTER = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}]/u;
const EACH_UNSPACED_CHARACTER = new RegExp(UNSPACED_CHARACTER.source, "gu");

const segmented = (text: string) => text.replace(EACH_UNSPACED_CHARACTER, " $& ");

/**
 * Scripts whose accented letters the tokenizer keeps as they are: its remove_diacritics folds precomposed Latin
 * letters only, but drops a combining accent in any script. So their letters are decomposed (NFD, "έ" is ε and
 * U+0301), in the indexed text and the query alike, and "καλημερα" finds "Καλημέρα". Kana and Hangul stay whole: a
 * voicing mark or a jamo is not an accent.
 */
const DECOMPOSED_SCRIPTS = /[\p{Script=Greek}\p{Script=Cyrillic}]/u;
const EACH_DECOMPOSED_RUN = new RegExp(`${DECOMPOSED_SCRIPTS.source}+`, "gu");

const decomposed = (text: string) => text.replace(EACH_DECOMPOSED_RUN, (run) => run.normalize("NFD"));

/** What the full-text index reads for `content`: null when it is the content itself (nothing to segment or decompose). */
export function searchTextOf(content: string | null | undefined): string | null {
  if (!content) return null;
  let text = DECOMPOSED_SCRIPTS.test(content) ? decomposed(content) : content;
  if (UNSPACED_CHARACTER.test(text)) text = segmented(text);
  return text === content ? null : text;
}

/**
 * Longest phrase, in UTF-16 units. FTS5 matches a phrase in time proportional to its tokens times the tokens of each
 * item holding them, so a single "word" of thousands of tokens (`x.x.x.…`, a long sentence without spaces, which a
 * 64 KiB query may be) would cost seconds of database time per call. A longer word keeps its start: cut after its
 * last whole token within the limit, or, in a run of letters longer than the limit, cut there and matched as a prefix.
 */
export const MAX_PHRASE_CHARS = 64;
// Never part of a token (unicode61 keeps letters, numbers, private use, and accents it may drop): a safe place to cut.
const SEPARATOR = /[^\p{L}\p{N}\p{M}\p{Co}]/u;

function phrase(word: string): string {
  let text = segmented(word).trim().replace(/\s+/gu, " ");
  let prefix = false;
  if (text.length > MAX_PHRASE_CHARS) {
    // Punctuation before the first token matches nothing.
    text = text.slice(Math.max(0, text.search(TOKEN_CHARACTER)));
    if (text.length > MAX_PHRASE_CHARS) {
      let cut = 0;
      let at = 0;
      for (const char of text) {
        if (at > MAX_PHRASE_CHARS) break;
        if (at > 0 && SEPARATOR.test(char)) cut = at;
        at += char.length;
      }
      prefix = cut === 0;
      text = prefix ? headOf(text, MAX_PHRASE_CHARS) : text.slice(0, cut);
    }
  }
  return `"${text.replaceAll('"', '""')}"${prefix ? " *" : ""}`;
}

/** The MATCH expression for `text`, or null when it holds no searchable word. */
export function ftsMatchExpression(text: string): string | null {
  const terms = new Set<string>();
  for (const word of text.replace(CONTROL_CHARACTERS, " ").split(/\s+/u)) {
    if (!TOKEN_CHARACTER.test(word)) continue;
    // Decomposed, as text is indexed now; as typed too, which text indexed before decomposition holds.
    for (const form of [decomposed(word), word]) if (terms.size < MAX_QUERY_TERMS) terms.add(phrase(form));
    if (terms.size === MAX_QUERY_TERMS) break;
  }
  return terms.size ? [...terms].join(" OR ") : null;
}
