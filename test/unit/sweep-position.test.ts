import { describe, expect, it } from "vitest";
import { BlobStoreFailed } from "../../src/artifacts/blob-fault";
import { BlobStoreTimeout } from "../../src/artifacts/blob-timeout";
import { BoundedBucket } from "../../src/artifacts/bounded-bucket";
import { readSweepPosition } from "../../src/retention/sweep-position";

/**
 * A sweep's place read back (src/retention/sweep-position.ts): one stored unreadable is the start, one R2 does not give
 * is the caller's to handle (the orphan walk fails, the message-ref backfill waits), its body included. The bucket is
 * R2 as BoundedBucket wraps it; R2 itself is a stand-in holding one object whose body reads as `json` says.
 */
const KEY = "host/some-sweep.json";
const BOUND_MS = 50;

function bucketWhoseBody(json: () => Promise<unknown>): BoundedBucket {
  const object = { key: KEY, size: 2, body: new ReadableStream<Uint8Array>(), bodyUsed: false, json, writeHttpMetadata: () => undefined };
  const r2 = { get: async () => object } as unknown as R2Bucket;
  return new BoundedBucket(r2, BOUND_MS);
}

const placeOf = (p: Record<string, unknown>) => (typeof p.after === "string" ? p.after : null);

describe("a sweep's place, read back", () => {
  it("stored, is the place", async () => {
    expect(await readSweepPosition(bucketWhoseBody(async () => ({ after: "artifacts/b" })), KEY, placeOf)).toBe("artifacts/b");
  });

  it("stored unreadable (not JSON, as workerd's json() throws it), is the start", async () => {
    const notJson = () => Promise.reject(new SyntaxError(`Unexpected token 'o', "not json" is not valid JSON`));
    expect(await readSweepPosition(bucketWhoseBody(notJson), KEY, placeOf)).toBeNull();
  });

  it("its body failed by R2, is R2 not giving it: thrown, as a get that fails is, not taken for the start", async () => {
    const lost = () => Promise.reject(new Error("Network connection lost."));
    const read = readSweepPosition(bucketWhoseBody(lost), KEY, placeOf);
    await expect(read).rejects.toBeInstanceOf(BlobStoreFailed);
    await expect(read).rejects.toMatchObject({ op: "read", target: KEY });
  });

  it("its body never sent, is R2 not answering: thrown once the bound has passed", async () => {
    const read = readSweepPosition(bucketWhoseBody(() => new Promise(() => undefined)), KEY, placeOf);
    await expect(read).rejects.toBeInstanceOf(BlobStoreTimeout);
  });
});
