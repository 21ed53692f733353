import { describe, expect, it } from "vitest";
import { ShownCap } from "../../src/delivery/shown-cap";

describe("ShownCap", () => {
  it("says nothing when nothing was cut", () => {
    const cap = new ShownCap(3);
    expect(cap.take(["a", "b"])).toEqual(["a", "b"]);
    expect(cap.notice()).toBeNull();
  });

  it("shows files up to the cap across messages and counts the rest", () => {
    const cap = new ShownCap(3);
    expect(cap.take(["a", "b"])).toEqual(["a", "b"]);
    expect(cap.filesLeft).toBe(1);
    expect(cap.take(["c", "d", "e"])).toEqual(["c"]);
    expect(cap.take(["f"])).toEqual([]);
    cap.fileCut();
    expect(cap.notice()).toBe("(4 more files of this answer are not shown here.)");
  });

  it("counts a message past the cap with the files it carried, in one notice", () => {
    const cap = new ShownCap(2);
    expect(cap.full(1)).toBe(false);
    expect(cap.full(2)).toBe(true);
    cap.messageCut(0);
    expect(cap.notice()).toBe("(1 more message of this answer is not shown here.)");
    cap.messageCut(1);
    expect(cap.notice()).toBe("(2 more messages and 1 more file of this answer are not shown here.)");
  });
});
