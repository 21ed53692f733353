import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";

/**
 * README (Retention): "Each of these steps runs whatever happened to the ones before it (R2 away, a query
 * refused), so one that keeps failing never holds the others back". EventLog retention failing must not keep
 * Transcript retention from running.
 */
const DAY_MS = 24 * 3600 * 1000;
let host: TestHost;

beforeAll(async () => {
  // No agent binds these events: each one is an EventLog row and a user transcript item.
  host = await startTestHost({ vars: { RETENTION_DAYS: "1" } });
});
afterAll(() => host?.dispose());

describe("transcript retention when EventLog retention keeps failing", () => {
  it("still deletes old transcript items", async () => {
    for (const text of ["one", "two", "three"]) expect((await host.postEvent(messageEvent("hist-steps", text))).status).toBe(202);
    const items = () => host.query<{ seq: number }>("SELECT seq FROM transcript WHERE conversation_id = 'hist-steps' ORDER BY seq").then((r) => r.map((x) => x.seq));
    expect(await items()).toEqual([1, 2, 3]);
    const scheduledTime = new Date(Date.now() + 2 * DAY_MS);
    // The EventLog walk's read is refused on every invocation (a statement that keeps failing).
    for (let i = 0; i < 3; i++) {
      host.databaseOutage({ queries: 1, matching: 'FROM \\"event_log\\" ORDER BY' });
      await expect(host.triggerScheduled({ scheduledTime })).rejects.toThrow();
    }
    host.databaseOutage({ queries: 0 });
    // The conversation's newest item stays; the older ones are past RETENTION_DAYS and go.
    expect(await items()).toEqual([3]);
  });
});
