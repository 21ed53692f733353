import { describe, expect, it } from "vitest";
import { MAX_UNKNOWN_TYPE_WARNINGS, UnknownTypeWarnings } from "../../src/run/unknown-type-warnings";

/** A run's warnings of unknown result types stay bounded however many types, or however long names, a runner sends. */
describe("UnknownTypeWarnings", () => {
  it("warns of each type's first few, counting the rest until taken", () => {
    const warnings = new UnknownTypeWarnings();
    const admitted = Array.from({ length: MAX_UNKNOWN_TYPE_WARNINGS + 2 }, () => warnings.admit("x.a"));
    expect(admitted.filter(Boolean)).toHaveLength(MAX_UNKNOWN_TYPE_WARNINGS);
    expect(warnings.admit("x.b")).toBe(true);
    expect(warnings.takeUnwarned()).toBe(2);
    expect(warnings.takeUnwarned()).toBe(0);
  });

  it("keeps at most 100 types apart: a type past them gets no warning, only a count", () => {
    const warnings = new UnknownTypeWarnings();
    for (let i = 0; i < 100; i++) expect(warnings.admit(`t${i}`)).toBe(true);
    expect(warnings.admit("t100")).toBe(false);
    expect(warnings.admit("t0")).toBe(true);
    expect(warnings.takeUnwarned()).toBe(1);
  });

  it("tells types apart by their first 200 characters", () => {
    const warnings = new UnknownTypeWarnings();
    const long = "y".repeat(200);
    for (let i = 0; i < MAX_UNKNOWN_TYPE_WARNINGS; i++) expect(warnings.admit(`${long}${i}`)).toBe(true);
    expect(warnings.admit(`${long}z`)).toBe(false);
  });
});
