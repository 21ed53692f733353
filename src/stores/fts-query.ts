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

/** What the full-text index reads for `content`: null when it is the content itself (nothing to segment). */
export function searchTextOf(content: string | null | undefined): string | null {
  if (!content) return null;
  return UNSPACED_CHARACTER.test(content) ? segmented(content) : null;
}

/** The MATCH expression for `text`, or null when it holds no searchable word. */
export function ftsMatchExpression(text: string): string | null {
  const terms = new Set<string>();
  for (const word of text.replace(CONTROL_CHARACTERS, " ").split(/\s+/u)) {
    if (!TOKEN_CHARACTER.test(word)) continue;
    terms.add(`"${segmented(word).trim().replace(/\s+/gu, " ").replaceAll('"', '""')}"`);
    if (terms.size === MAX_QUERY_TERMS) break;
  }
  return terms.size ? [...terms].join(" OR ") : null;
}
