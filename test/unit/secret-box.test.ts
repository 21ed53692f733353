import { describe, expect, it } from "vitest";
import { openValues, sealValues, SealedSecretError, secretBox } from "../../src/lib/secret-box";

const KEY = Buffer.alloc(32, 1).toString("base64");
const OTHER_KEY = Buffer.alloc(32, 2).toString("base64");

describe("secretBox", () => {
  it("seals with a fresh IV each time and opens what it sealed", async () => {
    const box = secretBox(KEY);
    const a = await box.seal("sk-live-123");
    const b = await box.seal("sk-live-123");
    expect(a).toMatch(/^sealed:v1:/);
    expect(a).not.toContain("sk-live-123");
    expect(a).not.toBe(b);
    expect(await box.open(a)).toBe("sk-live-123");
    expect(await box.open(b)).toBe("sk-live-123");
    expect(await box.seal(null)).toBeNull();
    expect(await box.open(null)).toBeNull();
  });

  it("opens a value stored before a key was set as it is, and stores as given without a key", async () => {
    expect(await secretBox(KEY).open("plain-old-key")).toBe("plain-old-key");
    expect(await secretBox(undefined).seal("kept-as-given")).toBe("kept-as-given");
  });

  it("refuses to open a sealed value without its key, saying why", async () => {
    const sealed = await secretBox(KEY).seal("sk-live-123");
    await expect(secretBox(OTHER_KEY).open(sealed)).rejects.toThrow(/sealed under neither SECRETS_KEY nor SECRETS_KEY_PREVIOUS/);
    await expect(secretBox(undefined).open(sealed)).rejects.toBeInstanceOf(SealedSecretError);
    // A tampered value fails the GCM tag check.
    const tampered = sealed.slice(0, -4) + (sealed.endsWith("AAAA") ? "BBBB" : "AAAA");
    await expect(secretBox(KEY).open(tampered)).rejects.toBeInstanceOf(SealedSecretError);
    await expect(secretBox(KEY).open("sealed:v1:%%% not base64")).rejects.toBeInstanceOf(SealedSecretError);
  });

  it("rotates: opens under the previous key too, and reseals only what is not under the current one", async () => {
    const old = await secretBox(OTHER_KEY).seal("sk-old");
    const rotating = secretBox(KEY, OTHER_KEY);
    expect(await rotating.open(old)).toBe("sk-old");
    const moved = await rotating.reseal(old);
    expect(moved).toMatch(/^sealed:v1:/);
    expect(await secretBox(KEY).open(moved!)).toBe("sk-old");
    expect(await rotating.reseal(moved!)).toBeUndefined();
    expect(await secretBox(KEY).open((await rotating.reseal("plain-before-any-key"))!)).toBe("plain-before-any-key");
    expect(await rotating.reseal(null)).toBeUndefined();
    await expect(secretBox(undefined).reseal("x")).rejects.toBeInstanceOf(SealedSecretError);
  });

  it("seals the string values of a record and keeps its keys and other values", async () => {
    const box = secretBox(KEY);
    const sealed = await sealValues(box, { "x-api-key": "k-1", authorization: "Bearer t", retries: 3 });
    expect(Object.keys(sealed)).toEqual(["x-api-key", "authorization", "retries"]);
    expect(sealed.retries).toBe(3);
    expect(JSON.stringify(sealed)).not.toMatch(/k-1|Bearer t/);
    expect(await openValues(box, sealed)).toEqual({ "x-api-key": "k-1", authorization: "Bearer t", retries: 3 });
  });
});
