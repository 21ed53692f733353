import { describe, expect, it } from "vitest";
import { asStorageFault, BlobStoreFailed, isStorageSide } from "../../src/artifacts/blob-fault";
import { BlobStoreTimeout } from "../../src/artifacts/blob-timeout";

/** An error as R2's binding throws it: a plain Error, R2's code at the end of its message. */
const r2Error = (message: string) => new Error(message);

describe("which errors of an R2 call are storage's trouble", () => {
  it("R2 unwell or busy: its internal error, service unavailable, too many writes of one key", () => {
    for (const code of [10001, 10043, 10058]) expect(isStorageSide(r2Error(`put: R2's words. (${code})`))).toBe(true);
    // The code as a property, as an R2Error names it.
    expect(isStorageSide(Object.assign(new Error("get: unavailable"), { code: 10043 }))).toBe(true);
  });

  it("R2 not reached: an error without a code (a connection lost, the runtime's internal error)", () => {
    expect(isStorageSide(new Error("Network connection lost."))).toBe(true);
    expect(isStorageSide(new Error("internal error; reference = 0123456789abcdef"))).toBe(true);
  });

  it("a request the host made wrong is not: a key R2 cannot hold, a checksum, metadata too large, a precondition, a part", () => {
    for (const code of [10020, 10037, 10012, 10031, 10025, 10048, 100100]) expect(isStorageSide(r2Error(`put: R2's words. (${code})`))).toBe(false);
    // The binding's checks of its arguments, and a streamed body shorter than its length.
    expect(isStorageSide(new TypeError("FixedLengthStream did not see all expected bytes before close()."))).toBe(false);
    expect(isStorageSide(new RangeError("Invalid range"))).toBe(false);
    // A body R2 did send, read with json(), that is not JSON: the content's fault (workerd's words).
    expect(isStorageSide(new SyntaxError("Unexpected number in JSON at position 1 (line 1 column 2)"))).toBe(false);
  });

  it("wraps storage's trouble with its call and cause; leaves the host's own errors, and a timeout, as they are", () => {
    const cause = r2Error("put: We encountered an internal error. Please try again. (10001)");
    const wrapped = asStorageFault("put", "artifacts/a", cause);
    expect(wrapped).toBeInstanceOf(BlobStoreFailed);
    expect(wrapped).toMatchObject({ op: "put", target: "artifacts/a", cause, said: "failed (an R2 put did not go through)" });
    const own = r2Error("put: The specified object name is not valid. (10020)");
    expect(asStorageFault("put", "artifacts/a", own)).toBe(own);
    const timeout = new BlobStoreTimeout("get", "artifacts/a", 1000);
    expect(asStorageFault("get", "artifacts/a", timeout)).toBe(timeout);
  });
});
