import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startResourcesFixture, type ResourcesFixture } from "../support/resources-fixture";

/** README: a write the database refused leaves nothing behind; a large tool result's blob goes with its refused row. */

let world: ResourcesFixture;

beforeAll(async () => {
  world = await startResourcesFixture();
});
afterAll(async () => {
  world?.host.databaseOutage(false);
  await world?.close();
});

/** Blobs no artifact row names: retention finds artifact blobs through their rows. */
const unnamedBlobs = async () => {
  const named = new Set((await world.host.query<{ r2_key: string }>("SELECT r2_key FROM artifact")).map((r) => r.r2_key));
  return (await world.host.r2Keys("artifacts/")).filter((k) => !named.has(k));
};

describe("a large tool result whose artifact row the database refuses", () => {
  it("leaves no blob behind in R2 (README: a write the database refused leaves nothing behind)", async () => {
    expect(await unnamedBlobs()).toEqual([]);
    const { result } = await world.inRun("rv-tool-refused", async ({ api }) => {
      world.host.databaseOutage({ queries: 1, matching: 'insert into \\"artifact\\"' });
      const call = await api("tool.call", { tool_name: "big", parameters: {} });
      return { status: call.status, code: call.body.error?.code };
    });
    world.host.databaseOutage(false);
    expect(result.status).toBeGreaterThanOrEqual(400);
    expect(await unnamedBlobs()).toEqual([]);
  }, 60_000);
});
