import { beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/fake-platform";
import { deferred } from "../support/host-api";
import { useTelegramPlatform, type TelegramPlatform } from "../support/telegram-platform";

/**
 * The retention sweep reads expired artifacts, then deletes them. A chat reply re-using one of them in between moves
 * its expiry forward (README, Retention): the sweep used to delete it all the same, row and blob, by id. It now
 * deletes only rows still expired when deleted, and only their blobs.
 */
const platform = useTelegramPlatform();
const { update, post, contextFor } = platform;
let host: TelegramPlatform["host"];
beforeAll(() => void ({ host } = platform));

const DELETE_ARTIFACTS = 'delete from \\"artifact\\"';
const expiryOf = async (artifactId: string) => (await host.query<{ expires_at: number }>("SELECT expires_at FROM artifact WHERE artifact_id = ?", [artifactId]))[0]?.expires_at;
const ranWith = (text: string) => waitFor(() => contextFor(text)[0], 15_000, `the run of "${text}"`);

describe("an expired artifact a reply re-uses while the sweep deletes", () => {
  it("stays, row and blob, while the one beside it that stayed expired goes", async () => {
    const chat = "-104100";
    const plan = update(chat, { caption: "the plan", photo: [{ file_id: "sweep_plan", width: 800, height: 800 }] });
    expect((await post(plan)).status).toBe(200);
    const [kept] = (await ranWith("the plan")).input.attachments;
    expect((await post(update(chat, { caption: "old sketch", photo: [{ file_id: "sweep_sketch", width: 800, height: 800 }] }))).status).toBe(200);
    const [gone] = (await ranWith("old sketch")).input.attachments;

    // Both expire before the sweep's scheduled time; a reply now still finds the plan's photo unexpired.
    const endsAt = Date.now() + 60_000;
    await host.query("UPDATE artifact SET expires_at = ? WHERE artifact_id IN (?, ?)", [endsAt, kept.artifact_id, gone.artifact_id]);

    // The sweep's delete held once it reaches the database: its read of what expired is done by then.
    const arrived = deferred();
    const release = deferred();
    host.databaseOutage({ holdUntil: release.promise, matching: DELETE_ARTIFACTS, onHeld: arrived.resolve });
    const sweep = host.triggerScheduled({ scheduledTime: new Date(endsAt) });
    try {
      await arrived.promise;
      // Meanwhile a reply re-uses the plan's photo, which then lasts as long as the reply's own files would.
      expect((await post(update(chat, { text: "still on?", reply_to_message: plan.message }))).status).toBe(200);
      expect((await ranWith("still on?")).input.attachments).toEqual([kept]);
      await waitFor(async () => (await expiryOf(kept.artifact_id)) > endsAt, 15_000, "the reply's extension");
    } finally {
      release.resolve();
    }
    await sweep;

    expect(await expiryOf(kept.artifact_id), "the re-used artifact's row").toBeDefined();
    expect(await expiryOf(kept.artifact_id)).toBeGreaterThan(endsAt);
    expect(await host.r2Object(`artifacts/${kept.artifact_id}`)).not.toBeNull();
    expect(await expiryOf(gone.artifact_id)).toBeUndefined();
    expect(await host.r2Object(`artifacts/${gone.artifact_id}`)).toBeNull();
  });
});
