import { describe, expect, it } from "vitest";
import { compilePattern } from "../../src/resources/ecma-pattern";
import { validateJsonSchema, type JsonSchema } from "../../src/resources/json-schema";

const valid = (schema: JsonSchema, value: unknown) => validateJsonSchema(schema, value).length === 0;

/** JSON Schema patterns are ECMA-262 regular expressions; the host runs them on RE2, which reads some of them differently. */
describe("schema patterns read as ECMA-262", () => {
  it("gives \\s, \\S and . their JavaScript meaning (Unicode spaces, every line terminator)", () => {
    const cases: [string, string][] = [
      ["^\\S+$", "a\u00a0b"],
      ["^\\S+$", "a\u000bb"],
      ["^\\S+$", "ab"],
      ["^.+$", "a\rb"],
      ["^.+$", "a\u2028b"],
      ["^.+$", "a b"],
      ["^\\s+$", "\u00a0\u3000\ufeff"],
      ["^[\\s,]+$", "\u2003,"],
      ["^[.]+$", "..."],
      ["^[.]+$", "ab"],
      ["^\\\\s$", "\\s"],
      ["^a[]$", "a"],
      ["^a[^]b$", "a\nb"],
      ["^\\u00e9\\u{1F600}$", "é😀"],
      ["^[\\s\\S]+$", "a\nb\u2028c"],
      ["^[\\S\\d]+$", "a1"],
      ["^[\\S\\d]+$", "a 1"],
      ["^[^\\S\\n]+$", " \t\u00a0"],
      ["^[^\\S\\n]+$", " \n"],
      ["^[^\\S\\r\\n]+$", "\r"],
      ["^[^\\S]+$", "\u3000"],
      ["^[\\]a]+$", "]a"],
      ["^[a-c\\u00e9]+$", "abé"],
    ];
    for (const [pattern, text] of cases) expect([pattern, text, compilePattern(pattern)?.test(text)]).toEqual([pattern, text, new RegExp(pattern, "u").test(text)]);
  });

  it("refuses what RE2 cannot say the same way, rather than run something else", () => {
    // Spaces but letters: RE2 has no class intersection.
    expect(compilePattern("[^\\Sa]")).toBeNull();
    expect(compilePattern("[abc")).toBeNull();
    expect(compilePattern("abc\\")).toBeNull();
    expect(compilePattern("(?=a)")).toBeNull();
  });

  it("validates a tool's arguments with the JavaScript reading", () => {
    const noSpace: JsonSchema = { type: "string", pattern: "^\\S+$" };
    const oneLine: JsonSchema = { type: "string", pattern: "^.+$" };
    expect([valid(noSpace, "a\u00a0b"), valid(noSpace, "ab"), valid(oneLine, "a\u2028b"), valid(oneLine, "ab")]).toEqual([false, true, false, true]);
  });
});

/** "What it cannot interpret it does not let through silently": a step budget spent inside a trial fails the validation. */
describe("schema validation out of its step budget", () => {
  it("fails closed inside if / not instead of reading the cut-short trial as a mismatch", () => {
    const email: JsonSchema = {
      type: "object",
      properties: { recipients: { type: "array", items: { type: "string" } }, confirm: { const: true } },
      required: ["recipients"],
      if: { properties: { recipients: { contains: { const: "all@corp.example" } } } },
      then: { required: ["confirm"] },
    };
    expect(valid(email, { recipients: ["all@corp.example"] })).toBe(false);
    expect(valid(email, { recipients: ["a@corp.example"] })).toBe(true);
    const padded = [...Array(60_000).fill("a@corp.example"), "all@corp.example"];
    expect(validateJsonSchema(email, { recipients: padded })).toContainEqual({ path: "", message: "the schema is too complex to check" });

    const notAllInts: JsonSchema = { type: "object", not: { required: ["x"], properties: { list: { items: { type: "integer" } } } } };
    expect(valid(notAllInts, { x: 1 })).toBe(false);
    expect(valid(notAllInts, { x: 1, list: Array(100_001).fill(1) })).toBe(false);
  });
});
