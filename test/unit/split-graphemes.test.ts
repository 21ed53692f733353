import { describe, expect, it } from "vitest";
import { splitMessage } from "../../src/platforms/split";

/**
 * A reply is cut hard when its window has no line break or space in its
 * second half (Chinese or Japanese text, long URLs). The cut moves back to the
 * start of the character it falls in: an emoji made of several code points (a
 * skin tone, a flag, a joined family) is never shown in halves.
 */
const graphemes = (s: string) => [...new Intl.Segmenter(undefined, { granularity: "grapheme" }).segment(s)].map((g) => g.segment);

function expectWholeGraphemes(text: string, max: number) {
  const parts = splitMessage(text, max);
  expect(parts.length).toBeGreaterThan(1);
  expect(parts.join("")).toBe(text);
  expect(parts.every((p) => p.length <= max)).toBe(true);
  const whole = new Set(graphemes(text));
  for (const part of parts) for (const g of graphemes(part)) expect(whole.has(g), `part shows a broken character ${JSON.stringify(g)}`).toBe(true);
}

describe("splitMessage keeps characters whole at a hard cut", () => {
  it("an emoji with a skin-tone modifier (👍🏽)", () => expectWholeGraphemes("好".repeat(93) + "👍🏽" + "好".repeat(10), 96));
  it("a flag (🇺🇸), two regional indicators", () => expectWholeGraphemes("好".repeat(92) + "🇺🇸" + "好".repeat(10), 95));
  it("a joined family emoji (👨‍👩‍👧)", () => expectWholeGraphemes("好".repeat(90) + "👨‍👩‍👧" + "好".repeat(10), 95));
  it("a base letter with combining marks", () => expectWholeGraphemes("x".repeat(98) + "e\u0301\u0302" + "y".repeat(10), 100));
  it("at Telegram's size: 4,096 units of Chinese text with a flag at the cut", () => expectWholeGraphemes("好".repeat(4094) + "🇯🇵" + "好".repeat(100), 4096));

  it("a character longer than the lookback is cut between code points, never inside a surrogate pair", () => {
    const zalgo = "a" + "\u0301".repeat(200);
    const parts = splitMessage("b".repeat(10) + zalgo + "c".repeat(10), 100);
    expect(parts.join("")).toBe("b".repeat(10) + zalgo + "c".repeat(10));
    const pairs = splitMessage("b".repeat(10) + "👍" + "\u{1F3FD}".repeat(60), 100);
    for (const part of pairs) expect(part).not.toMatch(/[\ud800-\udbff]$|^[\udc00-\udfff]/);
  });
});
