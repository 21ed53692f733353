import { describe, expect, it } from "vitest";
import { mcpSchemaValidator, validateJsonSchema, type JsonSchema } from "../../src/resources/json-schema";

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

  it("ignores keywords it does not implement instead of refusing", () => {
    expect(validateJsonSchema({ $ref: "#/defs/x", format: "email" }, "not-an-email")).toEqual([]);
    expect(validateJsonSchema({}, { anything: [1, 2] })).toEqual([]);
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
