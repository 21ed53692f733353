import { describe, expect, it } from "vitest";
import { normalizeCardAction } from "../../src/platforms/lark/card-action";

const press = { operator: { open_id: "ou_ada" }, action: { tag: "button", value: "yes" }, context: { open_chat_id: "oc_1", open_message_id: "om_1" } };
const at = Date.UTC(2026, 10, 22, 12, 0, 0);

describe("a Lark card press's create_time", () => {
  it("is read in microseconds as Lark stamps callbacks, and in milliseconds when stamped so: never 1970", () => {
    expect(normalizeCardAction("k1", press, { create_time: String(at * 1000) }).eventTime).toBe(new Date(at).toISOString());
    expect(normalizeCardAction("k2", press, { create_time: String(at) }).eventTime).toBe(new Date(at).toISOString());
    expect(normalizeCardAction("k3", press, { create_time: "soon" }).eventTime).toBeUndefined();
  });
});
