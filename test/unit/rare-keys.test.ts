import { describe, expect, it } from "vitest";
import { RareKeys } from "../../durable-objects/rare-keys";

/** A Durable Object storage's list, slow to answer, over keys written before (the platform's API, not ours). */
function storageWith(keys: string[], calls: { lists: number }) {
  const stored = new Map(keys.map((k) => [k, true]));
  const list = ({ prefix }: { prefix: string }) => {
    calls.lists++;
    const found = new Map([...stored].filter(([k]) => k.startsWith(prefix)));
    return new Promise<Map<string, boolean>>((resolve) => setTimeout(() => resolve(found), 20));
  };
  // Only `list` is called by RareKeys; the rest of the storage API is unused here.
  return { list } as unknown as DurableObjectStorage;
}

describe("RareKeys", () => {
  it("knows what an earlier instance left, and what this one writes, after one list", async () => {
    const calls = { lists: 0 };
    const keys = new RareKeys(storageWith(["p:left", "other:x"], calls), "p:");
    // Told while the first list is still on its way: applied after it, in order.
    keys.added("p:new");
    keys.removed("p:left");
    keys.added("p:gone");
    keys.removed("p:gone");
    expect([await keys.has("p:new"), await keys.has("p:left"), await keys.has("p:gone"), await keys.has("other:x")]).toEqual([true, false, false, false]);
    expect(await keys.any()).toBe(true);
    keys.removed("p:new");
    expect(await keys.any()).toBe(false);
    expect(calls.lists).toBe(1);
  });

  it("finds keys stored before it was made", async () => {
    const keys = new RareKeys(storageWith(["p:left"], { lists: 0 }), "p:");
    expect(await keys.has("p:left")).toBe(true);
  });
});

describe("RareKeys after a failed list", () => {
  it("lists again on the next ask instead of failing for the instance's life", async () => {
    let fail = true;
    const list = async () => {
      if (fail) throw new Error("storage unavailable");
      return new Map([["p:left", true]]);
    };
    // Only `list` is called by RareKeys (the platform's API, not ours).
    const keys = new RareKeys({ list } as unknown as DurableObjectStorage, "p:");
    // Told while that list fails: no unhandled rejection (vitest would fail the run on one).
    keys.added("p:new");
    await expect(keys.has("p:left")).rejects.toThrow("storage unavailable");
    fail = false;
    expect(await keys.has("p:left")).toBe(true);
  });
});
