import { describe, expect, it } from "vitest";
import { effectivePermissions } from "../../src/run/snapshot";
import { constantTimeEqual } from "../../src/lib/crypto";
import { decodeCursor, decodeKeyCursor, encodeCursor, encodeKeyCursor } from "../../src/lib/cursor";
import { durableObjectIdOfRun, newRunId } from "../../src/lib/ids";

describe("effective access", () => {
  it("is the manifest's request narrowed by the agent's allow list, group by group", () => {
    const manifest = { history: ["page", "search"] as ("page" | "search")[], events: ["get"] as "get"[], storage: ["plugin"] as "plugin"[] };
    // Storage is opt-in: the manifest's request alone grants no shared area.
    expect(effectivePermissions(manifest, undefined)).toEqual({ history: ["page", "search"], events: ["get"] });
    expect(effectivePermissions(manifest, { storage: ["plugin"] })).toEqual(manifest);
    expect(effectivePermissions(manifest, { history: ["page"], storage: [] })).toEqual({ history: ["page"], events: ["get"] });
    // An allow list cannot add what the manifest did not ask for.
    expect(effectivePermissions({}, { history: ["page"] })).toEqual({});
  });
});

describe("small primitives", () => {
  it("compares strings in constant time and correctly", () => {
    expect(constantTimeEqual("abc", "abc")).toBe(true);
    expect(constantTimeEqual("abc", "abd")).toBe(false);
    expect(constantTimeEqual("abc", "abcd")).toBe(false);
  });

  it("round-trips cursors and refuses one from another listing", () => {
    expect(decodeCursor("t", encodeCursor("t", 42, "conv-a"), "conv-a")).toBe(42);
    expect(() => decodeCursor("e", encodeCursor("t", 42, "conv-a"), "conv-a")).toThrow(/not valid/);
    expect(() => decodeCursor("t", encodeCursor("t", 42, "conv-a"), "conv-b")).toThrow(/another listing/);
    expect(() => decodeCursor("t", "%%%", "conv-a")).toThrow(/not valid/);
    // Cursors issued before owner tags still read, in any listing of their kind.
    expect(decodeCursor("t", btoa("t:42"), "conv-b")).toBe(42);
    expect(decodeCursor("e", encodeCursor("e", 7, null), "conv-b")).toBe(7);
    expect(decodeKeyCursor(encodeKeyCursor("état/1"))).toBe("état/1");
  });

  it("encodes the owning Durable Object in a run id", () => {
    const hex = "a".repeat(64);
    expect(durableObjectIdOfRun(newRunId(hex))).toBe(hex);
    expect(durableObjectIdOfRun("run_short")).toBeNull();
  });
});
