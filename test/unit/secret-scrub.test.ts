import { describe, expect, it } from "vitest";
import { REDACTED, scrub, scrubbedHead, type TextCut } from "../../src/lib/scrub";
import { SecretMatcher } from "../../src/lib/secret-matcher";
import { headOf } from "../../src/lib/text";
import { redact, StreamRedactor } from "../../src/resources/secrets";
import { seededRandom } from "../support/seeded-random";

/**
 * The scrubber against a naive reading of what it promises: every unit that some occurrence of a fragment in the text
 * as sent covers is hidden, each stretch of them (overlapping or touching) one `[redacted]`; a cut end leaves out the
 * longest piece there that a fragment running past it could hold. Texts and fragments are drawn from a few letters and
 * the marker's own, so overlaps, secrets inside secrets and secrets inside `[redacted]` come often.
 */
const LETTERS = "abcdt[]e";

/** The seeded generator (a failure names its seed), with texts of the letters above. */
function random(seed: number) {
  const { int } = seededRandom(seed);
  const text = (length: number, letters = LETTERS) => Array.from({ length }, () => letters[int(letters.length)]).join("");
  return { int, text };
}

/** A proper prefix (or suffix) of `f` of length k: 1 ≤ k < f.length. */
const longestCut = (fragments: string[], fits: (f: string, k: number) => boolean, limit: number) => {
  let longest = 0;
  for (const f of fragments) for (let k = 1; k < f.length && k <= limit; k++) if (fits(f, k)) longest = Math.max(longest, k);
  return longest;
};

function naive(text: string, fragments: string[], cut: TextCut = {}): string {
  const covered = new Array<boolean>(text.length).fill(false);
  for (const f of fragments) {
    if (!f) continue;
    for (let i = 0; i + f.length <= text.length; i++) if (text.startsWith(f, i)) covered.fill(true, i, i + f.length);
  }
  const n = text.length;
  const to = n - (cut.tail ? longestCut(fragments, (f, k) => text.endsWith(f.slice(0, k)), n) : 0);
  const from = cut.head ? longestCut(fragments, (f, k) => text.startsWith(f.slice(f.length - k)), n) : 0;
  const inside = (f: string) => {
    for (let j = 1; j + n < f.length; j++) if (f.startsWith(text, j)) return true;
    return false;
  };
  if (from >= to || (cut.head && cut.tail && n > 0 && fragments.some(inside))) return "";
  let out = "";
  for (let i = from; i < to; i++) {
    if (!covered[i]) out += text[i];
    else if (i === from || !covered[i - 1]) out += REDACTED;
  }
  return out;
}

function draw(seed: number) {
  const r = random(seed);
  const fragments = Array.from({ length: 1 + r.int(5) }, () => r.text(1 + r.int(7)));
  // Now and then, a fragment the marker holds, or a long one other fragments are in.
  if (r.int(4) === 0) fragments.push(REDACTED.slice(r.int(4), 4 + r.int(6)));
  if (r.int(4) === 0) fragments.push(`${fragments[0]}${r.text(3)}${fragments.at(-1)}${r.text(2)}`);
  const text = r.text(r.int(60));
  return { r, fragments, text };
}

const SEEDS = Array.from({ length: 2000 }, (_, i) => i + 1);

describe("scrubbing a text whole", () => {
  it("hides what the fragments cover in the text as sent, each stretch once (random sets and texts)", () => {
    for (const seed of SEEDS) {
      const { fragments, text } = draw(seed);
      expect(redact(text, fragments), `seed ${seed}: ${JSON.stringify({ fragments, text })}`).toBe(naive(text, fragments));
    }
  });

  it("leaves out of a cut end what a fragment running past it could hold (tail, head, both)", () => {
    for (const seed of SEEDS) {
      const { fragments, text } = draw(seed);
      const matcher = new SecretMatcher(fragments);
      for (const cut of [{ tail: true }, { head: true }, { head: true, tail: true }]) {
        expect(scrub(text, matcher, cut), `seed ${seed} ${JSON.stringify({ cut, fragments, text })}`).toBe(naive(text, fragments, cut));
      }
    }
  });

  it("shows of a head read alone no more than the whole text scrubbed shows, and no part of a secret", () => {
    for (const seed of SEEDS) {
      const { r, fragments, text } = draw(seed);
      const max = r.int(30);
      const shown = scrubbedHead(text, new SecretMatcher(fragments), max);
      const whole = headOf(naive(text, fragments), max);
      // The head read ends inside the text: a secret running past it is left out, so the quote may end sooner.
      expect(whole.startsWith(shown), `seed ${seed}: ${JSON.stringify({ fragments, text, max, shown, whole })}`).toBe(true);
      if (text.length <= max + Math.max(...fragments.map((f) => f.length))) expect(shown).toBe(whole);
    }
    // A long secret first takes less room as `[redacted]` than it did: the head read ends inside the next one.
    const fragments = ["A".repeat(30), "bcdefghijklmnop"];
    const text = `${"A".repeat(30)}${"x".repeat(9)}bcdefghijklmnop and more`;
    expect(scrubbedHead(text, new SecretMatcher(fragments), 20)).toBe(`[redacted]${"x".repeat(9)}`);
    expect(headOf(naive(text, fragments), 20)).toBe(`[redacted]${"x".repeat(9)}[`);
  });

  it("takes neither the marker nor a longer secret apart with a short one", () => {
    const fragments = ["sk-live-0123456789", "dact", "e", "123"];
    expect(redact("got sk-live-0123456789 used", fragments)).toBe("got [redacted] us[redacted]d");
    expect(scrub("got sk-live-0123", new SecretMatcher(fragments), { tail: true })).toBe("got ");
  });
});

describe("scrubbing a text streamed in pieces", () => {
  it("gives out, joined, the whole text scrubbed, and after each piece all but what may start a secret", () => {
    for (const seed of SEEDS) {
      const { r, fragments, text } = draw(seed);
      const stream = new StreamRedactor(fragments);
      let given = "";
      for (let at = 0; at < text.length; ) {
        // Pieces of 0 to 6 units, a secret split across two or more of them now and then.
        const piece = text.slice(at, (at += r.int(7)));
        given += stream.push(piece);
        const sofar = text.slice(0, at);
        expect(given, `seed ${seed} after ${JSON.stringify(sofar)}: ${JSON.stringify(fragments)}`).toBe(naive(sofar, fragments, { tail: true }));
      }
      given += stream.flush();
      expect(given, `seed ${seed}: ${JSON.stringify({ fragments, text })}`).toBe(naive(text, fragments));
    }
  });

  it("holds a secret's head across pieces and a stream's end, and lets go of what it held", () => {
    const stream = new StreamRedactor(["Bearer sk-inner-0123456 XY9", "sk-inner-0123456"]);
    expect(stream.push("you used Bearer sk-in")).toBe("you used ");
    expect(stream.push("ner-0123456 X")).toBe("");
    expect(stream.push("Y9 ok")).toBe("[redacted] ok");
    expect(stream.push(" Bearer sk")).toBe(" ");
    expect(stream.flush()).toBe("Bearer sk");
  });

  it("holds no more than the longest secret, however long the stream", () => {
    const secret = `${"a".repeat(40)}b`;
    const stream = new StreamRedactor([secret]);
    let given = 0;
    for (let i = 0; i < 5000; i++) given += stream.push("a").length;
    // Each "a" may begin the secret only while fewer than 40 came after it.
    expect(given).toBe(5000 - 40);
    expect(stream.push("b")).toBe(REDACTED);
  });
});
