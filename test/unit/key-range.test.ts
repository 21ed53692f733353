import { describe, expect, it } from "vitest";
import { prefixUpperBound } from "../../src/lib/key-range";

describe("prefixUpperBound", () => {
  it("bounds every key that starts with the prefix, whatever comes after it", () => {
    const utf8 = (s: string) => Buffer.from(s, "utf8");
    const bound = prefixUpperBound("p")!;
    expect(bound).toBe("q");
    // SQLite compares UTF-8 bytes: a non-BMP character after the prefix must still sort below the bound.
    for (const key of ["p", "p\uffff", "p🙂", "p\u{10ffff}x"]) expect(Buffer.compare(utf8(key), utf8(bound))).toBe(-1);
    expect(prefixUpperBound("a\ud7ff")).toBe("a\ue000");
    expect(prefixUpperBound("a\u{10ffff}")).toBe("b");
    expect(prefixUpperBound("\u{10ffff}")).toBeUndefined();
  });
});
