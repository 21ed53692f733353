import { beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/fake-platform";
import { useDiscordPlatform, type DiscordPlatform } from "../support/discord-platform";

/**
 * Discord never sends an interaction again: one whose raw payload R2 does not take is answered as usual (its deferral),
 * its run answers by editing @original, and the event is kept without its raw copy (README "R2 that does not answer"):
 * its run is never handed the name of a payload the host cannot serve.
 */
const platform = useDiscordPlatform({ storageDrill: true });
const { post, command, writesFor, runOf, contextFor } = platform;
let host: DiscordPlatform["host"];
let botId: string;
beforeAll(() => void ({ host, botId } = platform));

describe("Discord: a raw payload R2 does not take", () => {
  it("the interaction is deferred as usual, its run's answer edits @original, and its raw copy is said not stored", async () => {
    // Only this interaction's payload carries the question: its put alone fails.
    host.storageOutage({ puts: 1, matching: "raw refused here" });
    const i = command("raw refused here");
    const ack = await post(i);
    expect([ack.status, ack.body]).toEqual([200, { type: 5 }]);
    const eventId = `discord:${botId}:${i.id}`;
    await host.waitForRun((await runOf(i)).run_id);
    await waitFor(() => writesFor(i).some((w) => w.method === "PATCH" && w.path.endsWith("/messages/@original") && w.body?.content === "echo: raw refused here"), 10_000, "the answer edited into @original");
    // The event names no payload R2 never got, and says so to an operator.
    expect(await host.query("SELECT raw_ref FROM event_log WHERE event_id = ?", [eventId])).toEqual([{ raw_ref: null }]);
    const raw = await host.admin("GET", `/v1/admin/events/${encodeURIComponent(eventId)}/raw`);
    expect([raw.status, raw.body.error?.code]).toEqual([404, "not_found"]);
    expect(raw.body.error.message).toMatch(/was not stored/);
    expect(host.logs()).toMatch(/kept without its raw payload raw\/discord\//);
    await platform.keepsSecretsOut();
  });

  it("R2 failing the put: the run is handed no raw_ref, and event.get gives none either", async () => {
    host.storageFailure({ op: "put", key: "raw/discord/" });
    const i = command("rawref of a refused payload");
    const ack = await post(i);
    expect([ack.status, ack.body]).toEqual([200, { type: 5 }]);
    const [ctx] = await waitFor(() => contextFor("rawref of a refused payload").length > 0 && contextFor("rawref of a refused payload"), 10_000, "the run");
    expect(ctx.event.raw_ref ?? null).toBeNull();
    const answer = await waitFor(() => writesFor(i).find((w) => w.method === "PATCH" && w.path.endsWith("/messages/@original"))?.body?.content, 10_000, "the answer");
    expect(JSON.parse(answer)).toEqual({ context: null, eventGet: null });
    expect(await host.query("SELECT raw_ref FROM event_log WHERE event_id = ?", [`discord:${botId}:${i.id}`])).toEqual([{ raw_ref: null }]);
  });
});
