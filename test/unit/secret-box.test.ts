import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { moveSealed, moveSealedValues, openValues, sealValues, SealedSecretError, secretBox } from "../../src/lib/secret-box";

const KEY = Buffer.alloc(32, 1).toString("base64");
const OTHER_KEY = Buffer.alloc(32, 2).toString("base64");
const SLOT = { table: "models", id: "chat", destination: "https://api.example.com/v1" } as const;
const HEADERS = { table: "tools", id: "search", destination: "https://tools.example.com/search" } as const;

describe("secretBox", () => {
  it("seals with a fresh IV each time and opens what it sealed", async () => {
    const box = secretBox(KEY);
    const a = await box.seal("sk-live-123", SLOT);
    const b = await box.seal("sk-live-123", SLOT);
    expect(a).toMatch(/^sealed:v3:/);
    expect(a).not.toContain("sk-live-123");
    expect(a).not.toBe(b);
    expect(await box.open(a, SLOT)).toBe("sk-live-123");
    expect(await box.open(b, SLOT)).toBe("sk-live-123");
    expect(await box.seal(null, SLOT)).toBeNull();
    expect(await box.open(null, SLOT)).toBeNull();
  });

  it("opens a value stored before a key was set as it is, and stores as given without a key", async () => {
    expect(await secretBox(KEY).open("plain-old-key", SLOT)).toBe("plain-old-key");
    expect(await secretBox(undefined).seal("kept-as-given", SLOT)).toBe("kept-as-given");
  });

  it("refuses to open a sealed value without its key, saying why", async () => {
    const sealed = await secretBox(KEY).seal("sk-live-123", SLOT);
    await expect(secretBox(OTHER_KEY).open(sealed, SLOT)).rejects.toThrow(/sealed under neither SECRETS_KEY nor SECRETS_KEY_PREVIOUS/);
    await expect(secretBox(undefined).open(sealed, SLOT)).rejects.toBeInstanceOf(SealedSecretError);
    // A tampered value fails the GCM tag check.
    const tampered = sealed.slice(0, -4) + (sealed.endsWith("AAAA") ? "BBBB" : "AAAA");
    await expect(secretBox(KEY).open(tampered, SLOT)).rejects.toBeInstanceOf(SealedSecretError);
    await expect(secretBox(KEY).open("sealed:v3:%%% not base64", SLOT)).rejects.toBeInstanceOf(SealedSecretError);
  });

  it("rotates: opens under the previous key too, and reseals only what is not under the current one", async () => {
    const old = await secretBox(OTHER_KEY).seal("sk-old", SLOT);
    const rotating = secretBox(KEY, OTHER_KEY);
    expect(await rotating.open(old, SLOT)).toBe("sk-old");
    const moved = await rotating.reseal(old, SLOT);
    expect(moved).toMatch(/^sealed:v3:/);
    expect(await secretBox(KEY).open(moved!, SLOT)).toBe("sk-old");
    expect(await rotating.reseal(moved!, SLOT)).toBeUndefined();
    expect(await secretBox(KEY).open((await rotating.reseal("plain-before-any-key", SLOT))!, SLOT)).toBe("plain-before-any-key");
    expect(await rotating.reseal(null, SLOT)).toBeUndefined();
    await expect(secretBox(undefined).reseal("x", SLOT)).rejects.toBeInstanceOf(SealedSecretError);
  });

  it("seals the string values of a record and keeps its keys and other values", async () => {
    const box = secretBox(KEY);
    const sealed = await sealValues(box, { "x-api-key": "k-1", authorization: "Bearer t", retries: 3 }, HEADERS);
    expect(Object.keys(sealed)).toEqual(["x-api-key", "authorization", "retries"]);
    expect(sealed.retries).toBe(3);
    expect(JSON.stringify(sealed)).not.toMatch(/k-1|Bearer t/);
    expect(await openValues(box, sealed, HEADERS)).toEqual({ "x-api-key": "k-1", authorization: "Bearer t", retries: 3 });
  });

  it("binds a sealed value to its table, row and name: copied anywhere else it does not open", async () => {
    const box = secretBox(KEY);
    const sealed = await box.seal("sk-live-123", SLOT);
    for (const elsewhere of [
      { ...SLOT, id: "other" },
      { ...SLOT, table: "knowledge_bases" },
      { ...SLOT, name: "authorization" },
    ] as const)
      await expect(box.open(sealed, elsewhere)).rejects.toThrow(/sealed for another row or name/);
    const headers = await sealValues(box, { "x-api-key": "k-1", authorization: "Bearer t" }, HEADERS);
    await expect(openValues(box, { "x-api-key": headers.authorization }, HEADERS)).rejects.toBeInstanceOf(SealedSecretError);
    await expect(openValues(box, headers, { ...HEADERS, table: "mcp_servers" })).rejects.toBeInstanceOf(SealedSecretError);
    // A reseal does not launder a copied value into its new row: it cannot open it there either.
    await expect(box.reseal(sealed, { ...SLOT, id: "other" })).rejects.toBeInstanceOf(SealedSecretError);
  });

  it("opens a value sealed before binding (v1), under either key, and reseals it bound", async () => {
    const iv = new Uint8Array(12).fill(7);
    const key = await crypto.subtle.importKey("raw", Buffer.from(OTHER_KEY, "base64"), "AES-GCM", false, ["encrypt"]);
    const cipher = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv }, key, new TextEncoder().encode("sk-v1")));
    const v1 = `sealed:v1:${Buffer.concat([iv, cipher]).toString("base64")}`;
    const rotating = secretBox(KEY, OTHER_KEY);
    expect(await rotating.open(v1, SLOT)).toBe("sk-v1");
    const bound = await rotating.reseal(v1, SLOT);
    expect(bound).toMatch(/^sealed:v3:/);
    expect(await secretBox(KEY).open(bound!, SLOT)).toBe("sk-v1");
    await expect(secretBox(KEY).open(bound!, { ...SLOT, id: "other" })).rejects.toBeInstanceOf(SealedSecretError);
  });

  it("binds a sealed value to where its row sends it: another endpoint does not open it, and moveSealed seals it for a new one", async () => {
    const box = secretBox(KEY);
    const sealed = await box.seal("sk-live-123", SLOT);
    const elsewhere = { ...SLOT, destination: "https://attacker.example/v1" };
    await expect(box.open(sealed, elsewhere)).rejects.toThrow(/endpoint was changed/);
    await expect(box.reseal(sealed, elsewhere)).rejects.toBeInstanceOf(SealedSecretError);
    const moved = await moveSealed(box, sealed, SLOT, elsewhere);
    expect(await box.open(moved, elsewhere)).toBe("sk-live-123");
    await expect(box.open(moved, SLOT)).rejects.toBeInstanceOf(SealedSecretError);
    expect(await moveSealed(box, sealed, SLOT, { ...SLOT })).toBe(sealed);
    expect(await moveSealed(box, null, SLOT, elsewhere)).toBeNull();
    const headers = await sealValues(box, { authorization: "Bearer t" }, HEADERS);
    const movedHeaders = await moveSealedValues(box, headers, HEADERS, { ...HEADERS, destination: "https://tools.example.com/v2" });
    expect(await openValues(box, movedHeaders, { ...HEADERS, destination: "https://tools.example.com/v2" })).toEqual({ authorization: "Bearer t" });
    // Without the key (the operator has none yet) a plain value moves as it is.
    expect(await moveSealed(secretBox(undefined), "plain", SLOT, elsewhere)).toBe("plain");
  });

  it("opens a value sealed for its slot alone (v2, before destinations were bound), and reseals it for its destination", async () => {
    const iv = new Uint8Array(12).fill(9);
    const key = await crypto.subtle.importKey("raw", Buffer.from(KEY, "base64"), "AES-GCM", false, ["encrypt"]);
    const additionalData = new TextEncoder().encode(JSON.stringify([SLOT.table, SLOT.id, null]));
    const cipher = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData }, key, new TextEncoder().encode("sk-v2")));
    const v2 = `sealed:v2:${Buffer.concat([iv, cipher]).toString("base64")}`;
    const box = secretBox(KEY);
    expect(await box.open(v2, SLOT)).toBe("sk-v2");
    await expect(box.open(v2, { ...SLOT, id: "other" })).rejects.toBeInstanceOf(SealedSecretError);
    const bound = await box.reseal(v2, SLOT);
    expect(bound).toMatch(/^sealed:v3:/);
    expect(await box.open(bound!, SLOT)).toBe("sk-v2");
    await expect(box.open(bound!, { ...SLOT, destination: "https://attacker.example/v1" })).rejects.toBeInstanceOf(SealedSecretError);
  });

  it("digests a value keyed by SECRETS_KEY for one use: the current key's digest first, then the previous key's and the keyless one; never the bare hash", async () => {
    const secret = "slack-signing-secret-0123456789";
    const [current, previous, keyless] = await secretBox(KEY, OTHER_KEY).digests(secret, "bot app secret");
    expect(current).toMatch(/^[0-9a-f]{64}$/);
    expect(new Set([current, previous, keyless]).size).toBe(3);
    expect([current, previous, keyless]).not.toContain(createHash("sha256").update(secret).digest("hex"));
    // The same under the same key, whichever box computes it; after the rotation the old key's is still matched.
    expect(await secretBox(KEY).digests(secret, "bot app secret")).toEqual([current, keyless]);
    expect((await secretBox(OTHER_KEY).digests(secret, "bot app secret"))[0]).toBe(previous);
    expect(await secretBox(undefined).digests(secret, "bot app secret")).toEqual([keyless]);
    // Another use of the key, or another value, digests otherwise.
    expect((await secretBox(KEY).digests(secret, "another use"))[0]).not.toBe(current);
    expect((await secretBox(KEY).digests(`${secret}x`, "bot app secret"))[0]).not.toBe(current);
  });
});
