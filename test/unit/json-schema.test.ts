import { describe, expect, it } from "vitest";
import * as z from "zod";
import { validateJsonSchema, type JsonSchema } from "../../src/resources/json-schema";
import { schemaProblems } from "../../src/resources/json-schema-problems";
import { mcpSchemaValidator } from "../../src/resources/mcp-schema-validator";

const paths = (schema: JsonSchema, value: unknown) => validateJsonSchema(schema, value).map((i) => i.path);

describe("tool parameter schemas", () => {
  const weather: JsonSchema = {
    type: "object",
    properties: {
      city: { type: "string", minLength: 2 },
      days: { type: "integer", minimum: 1, maximum: 7 },
      unit: { enum: ["c", "f"] },
      tags: { type: "array", items: { type: "string" }, maxItems: 2 },
    },
    required: ["city"],
    additionalProperties: false,
  };

  it("accepts a conforming object", () => {
    expect(validateJsonSchema(weather, { city: "Oslo", days: 3, unit: "c", tags: ["a"] })).toEqual([]);
  });

  it("names each violation by JSON pointer", () => {
    expect(paths(weather, { days: 2.5, unit: "k", tags: ["a", 1, "c"], extra: true }).sort()).toEqual(
      ["/city", "/days", "/extra", "/tags", "/tags/1", "/unit"].sort(),
    );
    expect(validateJsonSchema(weather, "Oslo")[0]).toEqual({ path: "", message: "must be object, got string" });
  });

  it("handles type lists, const, combinators and pattern", () => {
    expect(paths({ type: ["string", "null"] }, null)).toEqual([]);
    expect(paths({ type: ["string", "null"] }, 1)).toEqual([""]);
    expect(paths({ const: { a: [1] } }, { a: [1] })).toEqual([]);
    expect(paths({ anyOf: [{ type: "string" }, { type: "number" }] }, true)).toEqual([""]);
    expect(paths({ oneOf: [{ type: "number" }, { type: "integer" }] }, 2)).toEqual([""]);
    expect(paths({ not: { type: "string" } }, 1)).toEqual([]);
    expect(paths({ type: "string", pattern: "^[a-z]+$" }, "abc1")).toEqual([""]);
    expect(paths({ type: "array", uniqueItems: true }, [{ a: 1 }, { a: 1 }])).toEqual([""]);
  });

  it("ignores keywords it does not implement (format, annotations) instead of refusing", () => {
    expect(validateJsonSchema({ format: "email", title: "address", examples: ["a@b.c"] }, "not-an-email")).toEqual([]);
    expect(validateJsonSchema({}, { anything: [1, 2] })).toEqual([]);
  });

  it("resolves local $refs ($defs, definitions, the root) and fails closed on one that does not resolve", () => {
    const pydantic: JsonSchema = {
      $defs: { Point: { type: "object", properties: { x: { type: "number" } }, required: ["x"] } },
      definitions: { Tag: { type: "string", maxLength: 3 } },
      type: "object",
      properties: { at: { $ref: "#/$defs/Point" }, tags: { type: "array", items: { $ref: "#/definitions/Tag" } } },
    };
    expect(validateJsonSchema(pydantic, { at: { x: 1 }, tags: ["a"] })).toEqual([]);
    expect(paths(pydantic, { at: { x: "1" }, tags: ["a", "long"] }).sort()).toEqual(["/at/x", "/tags/1"]);
    expect(paths(pydantic, { at: {} })).toEqual(["/at/x"]);
    // A recursive schema through the root, and JSON pointer escapes.
    const tree: JsonSchema = { type: "object", properties: { kids: { type: "array", items: { $ref: "#" } }, "a/b": { $ref: "#/$defs/x~1y" } }, $defs: { "x/y": { const: 1 } } };
    expect(validateJsonSchema(tree, { kids: [{ kids: [] }, { kids: [{ "a/b": 1 }] }] })).toEqual([]);
    expect(paths(tree, { kids: [{ kids: [{ "a/b": 2 }] }] })).toEqual(["/kids/0/kids/0/a~1b"]);
    expect(validateJsonSchema({ $ref: "#/$defs/missing" }, 1)[0].message).toContain("does not resolve");
    expect(validateJsonSchema({ $ref: "https://example.com/schema.json" }, 1)).toHaveLength(1);
  });

  it("stops a $ref loop at the depth guard", () => {
    const loop: JsonSchema = { $defs: { a: { $ref: "#/$defs/b" }, b: { $ref: "#/$defs/a" } }, $ref: "#/$defs/a" };
    expect(validateJsonSchema(loop, 1)[0].message).toBe("the schema is too complex to check");
    // Combinators over a recursive $ref do not explode either.
    const bomb: JsonSchema = { anyOf: [{ $ref: "#" }, { $ref: "#" }, { $ref: "#" }] };
    const started = Date.now();
    expect(validateJsonSchema(bomb, 1).length).toBeGreaterThan(0);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("runs patterns in linear time, takes the escapes real schemas use, and fails closed on what it cannot run", () => {
    // `\-` outside a class is an error with JavaScript's u flag; RE2 takes it.
    expect(paths({ type: "string", pattern: "^[a-z]+\\-[0-9]+$" }, "ab-12")).toEqual([]);
    expect(paths({ type: "string", pattern: "^[a-z]+\\-[0-9]+$" }, "ab12")).toEqual([""]);
    expect(paths({ type: "object", patternProperties: { "^x\\-": { type: "number" } } }, { "x-a": "no" })).toEqual(["/x-a"]);
    const broken = validateJsonSchema({ type: "string", pattern: "(unclosed" }, "anything");
    expect(broken).toEqual([{ path: "", message: expect.stringContaining('the schema\'s pattern "(unclosed" is not a regular expression this host runs') }]);
    // Backtracking engines take exponential time here; this one answers at once.
    expect(paths({ type: "string", pattern: "^([a-z]+\\s?)+$" }, `${"a".repeat(5000)}!`)).toEqual([""]);
    expect(paths({ type: "string", pattern: "^(a+)+$" }, "a".repeat(100_000))).toEqual([]);
    // ECMA-262's \u escapes, as schemas for CJK names write them.
    expect(paths({ type: "string", pattern: "^[A-Za-z\\u4e00-\\u9fa5]+$" }, "中文abc")).toEqual([]);
    expect(paths({ type: "string", pattern: "^[A-Za-z\\u4e00-\\u9fa5]+$" }, "中文abc!")).toEqual([""]);
    expect(paths({ type: "string", pattern: "^\\\\u0041$" }, "\\u0041")).toEqual([]);
    // Lookaround and backreferences need backtracking: refused, never run.
    expect(schemaProblems({ type: "string", pattern: "^(?=a)a$" })).toEqual([expect.stringContaining("lookaround, backreferences and counted repeats over 1000 are not supported")]);
    // Valid JavaScript, past RE2's repeat limit: refused, and the message names why.
    expect(schemaProblems({ type: "string", pattern: "^[a-z]{1,2000}$" })).toEqual([expect.stringContaining("counted repeats over 1000")]);
    expect(paths({ type: "string", pattern: "^(a)\\1$" }, "aa")).toEqual([""]);
  });

  it("refuses unevaluatedProperties and unevaluatedItems, and fails closed on them, rather than let anything through", () => {
    const closed = { type: "object", properties: { city: { type: "string" } }, unevaluatedProperties: false };
    expect(schemaProblems(closed)).toEqual([expect.stringContaining("unevaluatedProperties is not supported")]);
    expect(schemaProblems({ type: "array", items: { allOf: [{ unevaluatedItems: { type: "number" } }] } })).toEqual([expect.stringContaining("unevaluatedItems is not supported")]);
    expect(paths(closed, { city: "Oslo", delete_everything: true })).toEqual([""]);
    // `true` and `{}` allow what they would allow anyway.
    expect(schemaProblems({ type: "object", unevaluatedProperties: true, unevaluatedItems: {} })).toEqual([]);
  });

  it("accepts multiples of a decimal step despite binary floating point", () => {
    expect(paths({ multipleOf: 0.01 }, 0.07)).toEqual([]);
    expect(paths({ multipleOf: 0.1 }, 0.3)).toEqual([]);
    expect(paths({ multipleOf: 0.01 }, 19.99)).toEqual([]);
    expect(paths({ multipleOf: 0.1 }, 0.1 + 0.2)).toEqual([]);
    expect(paths({ multipleOf: 0.01 }, 0.075)).toEqual([""]);
    expect(paths({ multipleOf: 3 }, 10)).toEqual([""]);
    expect(paths({ multipleOf: 1.5 }, 4.5)).toEqual([]);
  });

  it("reads draft-4 boolean exclusiveMinimum/exclusiveMaximum as making the bounds exclusive", () => {
    const draft4: JsonSchema = { type: "number", minimum: 0, exclusiveMinimum: true, maximum: 10, exclusiveMaximum: true };
    expect(paths(draft4, 0)).toEqual([""]);
    expect(paths(draft4, 10)).toEqual([""]);
    expect(paths(draft4, 5)).toEqual([]);
    expect(paths({ minimum: 0, exclusiveMinimum: false }, 0)).toEqual([]);
    expect(paths({ exclusiveMinimum: 0 }, 0)).toEqual([""]);
  });

  it("checks uniqueItems in one pass, by value whatever the key order", () => {
    expect(paths({ uniqueItems: true }, [{ a: 1, b: [2] }, { b: [2], a: 1 }])).toEqual([""]);
    expect(paths({ uniqueItems: true }, [1, "1", [1], { a: 1 }, null, true])).toEqual([]);
    const many = Array.from({ length: 20_000 }, (_, i) => ({ id: i, tags: [`t${i}`] }));
    const started = Date.now();
    expect(validateJsonSchema({ uniqueItems: true }, many)).toEqual([]);
    expect(Date.now() - started).toBeLessThan(1_000);
    let deep: unknown = 1;
    for (let i = 0; i < 10_000; i++) deep = [deep];
    expect(validateJsonSchema({ uniqueItems: true }, [deep, deep])[0].message).toContain("nested deeper than");
    expect(validateJsonSchema({ const: deep }, deep)).toHaveLength(0); // the same object is equal without recursing
    expect(validateJsonSchema({ enum: [JSON.parse(JSON.stringify([[[[1]]]]))] }, [[[[1]]]])).toEqual([]);
  });

  it("names what makes a schema unusable, for refusing it at registration", () => {
    expect(schemaProblems({ type: "object", properties: { a: { type: "string", pattern: "^\\w+\\-x$" } }, $defs: { p: { type: "number" } }, required: ["a"] })).toEqual([]);
    expect(
      schemaProblems({
        type: "object",
        properties: { a: { pattern: "(" }, b: { $ref: "#/$defs/none" }, c: { $ref: "other.json#/x" }, d: { items: [{ $ref: "#/properties/a" }] } },
        patternProperties: { "[": {} },
        // Data, not schemas: not looked into.
        default: { pattern: "(" },
        enum: [{ $ref: "nowhere" }],
      }),
    ).toEqual([
      '/patternProperties: pattern "[" is not a regular expression this host runs (patterns run in linear time: lookaround, backreferences and counted repeats over 1000 are not supported)',
      '/properties/a/pattern: pattern "(" is not a regular expression this host runs (patterns run in linear time: lookaround, backreferences and counted repeats over 1000 are not supported)',
      '/properties/b/$ref: "#/$defs/none" does not resolve within the schema',
      '/properties/c/$ref: "other.json#/x" is not a local reference (only "#..." within the schema is supported)',
    ]);
  });

  it("refuses hostile nesting without exhausting the stack", () => {
    let value: unknown = 1;
    for (let i = 0; i < 10_000; i++) value = [value];
    let schema: JsonSchema = { type: "integer" };
    for (let i = 0; i < 10_000; i++) schema = { type: "array", items: schema };
    expect(validateJsonSchema(schema, value).length).toBeGreaterThan(0);
  });

  it("plugs into the MCP SDK's validator hook", () => {
    const validate = mcpSchemaValidator.getValidator<{ n: number }>({ type: "object", required: ["n"] });
    expect(validate({ n: 1 })).toEqual({ valid: true, data: { n: 1 }, errorMessage: undefined });
    expect(validate({})).toMatchObject({ valid: false, errorMessage: "/n: is required" });
  });
});

describe("keywords real tool schemas use beyond the basics", () => {
  it("propertyNames: what zod 4 (the MCP SDK's) publishes for a record with enum keys", () => {
    const schema = z.toJSONSchema(z.object({ limits: z.partialRecord(z.enum(["celsius", "kelvin"]), z.number()) })) as JsonSchema;
    expect(JSON.stringify(schema)).toContain("propertyNames");
    expect(validateJsonSchema(schema, { limits: { celsius: 1 } })).toEqual([]);
    expect(paths(schema, { limits: { "rm -rf /": 1 } })).toEqual(["/limits/rm -rf ~1"]);
  });

  it("dependentRequired, draft-7 dependencies (both forms), dependentSchemas", () => {
    const schema: JsonSchema = {
      type: "object",
      dependentRequired: { card: ["cvv"] },
      dependencies: { iban: ["bic"], vip: { required: ["tier"] } },
      dependentSchemas: { discount: { properties: { price: { minimum: 10 } } } },
    };
    expect(validateJsonSchema(schema, { name: "x" })).toEqual([]);
    expect(paths(schema, { card: "4111" })).toEqual(["/cvv"]);
    expect(paths(schema, { iban: "DE00" })).toEqual(["/bic"]);
    expect(paths(schema, { vip: true })).toEqual(["/tier"]);
    expect(paths(schema, { discount: 1, price: 5 })).toEqual(["/price"]);
  });

  it("contains with minContains / maxContains", () => {
    const schema: JsonSchema = { type: "array", contains: { const: "me" }, maxContains: 1 };
    expect(validateJsonSchema(schema, ["you", "me"])).toEqual([]);
    expect(validateJsonSchema(schema, ["you"])).not.toEqual([]);
    expect(validateJsonSchema(schema, ["me", "me"])).not.toEqual([]);
    expect(validateJsonSchema({ contains: { type: "number" }, minContains: 2 }, [1, "a", 2])).toEqual([]);
  });

  it("if / then / else", () => {
    const schema: JsonSchema = { if: { required: ["unit"], properties: { unit: { const: "kelvin" } } }, then: { properties: { value: { minimum: 0 } } }, else: { required: ["unit"] } };
    expect(validateJsonSchema(schema, { unit: "kelvin", value: 3 })).toEqual([]);
    expect(paths(schema, { unit: "kelvin", value: -3 })).toEqual(["/value"]);
    expect(paths(schema, { value: -3 })).toEqual(["/unit"]);
  });
});

