import { afterEach, describe, expect, it, vi } from "vitest";
import { AlbumGathering } from "../../durable-objects/album-gathering";
import { ALBUM_MAX_PARTS, albumRunFor, joinAlbum } from "../../durable-objects/albums";
import { RunTableStore } from "../../durable-objects/run-table";
import type { Config } from "../../src/env";
import { MemStorage } from "../support/mem-storage";
import { waitingRun, type RunTable, type StoredRun } from "../../durable-objects/scheduling";
import type { RunJob } from "../../src/run/job";

/** An album item's job: only what gathering reads is meaningful. */
function itemJob(runId: string, messageId: number, opts: { group?: string; source?: string; agentId?: string; text?: string } = {}): RunJob {
  const input = { text: opts.text ?? null, contents: [], attachments: [{ artifact_id: `art-${messageId}` }] };
  const event = { event_id: `evt-${runId}`, event_type: "message.received", source: opts.source ?? "telegram", data: { message_id: messageId, media_group_id: opts.group ?? "g1" } };
  const delivery = { botId: "bot", target: { platform: "telegram", chatId: "-1", messageThreadId: null, replyToMessageId: messageId } };
  // A partial job: albums read its event, input, delivery and agent id, and waitingRun its debounce.
  return { runId, event, input, delivery, agent: { agentId: opts.agentId ?? "agent", concurrency: {} }, runner: { capabilities: {} } } as unknown as RunJob;
}

const head = (job: RunJob, waitMs = 1_000, now = 0): [string, StoredRun] => [`run:${job.runId}`, waitingRun(job, "enqueue", now, waitMs)];
const joinable = () => true;

describe("Telegram albums", () => {
  it("an album's first item waits ALBUM_WAIT_MS; 0, another source, or no album starts at once as before", () => {
    expect(head(itemJob("a", 1), 1_500, 10)[1]).toMatchObject({ notBefore: 1_510, job: { album: { mediaGroupId: "g1" } } });
    expect(head(itemJob("a", 1), 0, 10)[1].notBefore).toBe(10);
    const api = head(itemJob("a", 1, { source: "api" }), 1_500, 10)[1];
    expect([api.notBefore, api.job.album]).toEqual([10, undefined]);
    expect(head(itemJob("a", 1, { group: "" }), 1_500, 10)[1].job.album).toBeUndefined();
  });

  it("items join in the album's order, each pushing the start back; the caption is the text", () => {
    let entry: readonly [string, StoredRun] = head(itemJob("a", 3), 1_000, 0);
    const store = (key: string, run: StoredRun) => (entry = [key, run]);
    for (const [runId, messageId, at, text] of [["b", 1, 400, "caption"], ["c", 2, 900, undefined]] as const) {
      const job = itemJob(runId, messageId, { text });
      const found = albumRunFor([entry], job, joinable)!;
      expect(joinAlbum(found, job, 1_000, at, store)).toEqual({ disposition: "merged", runId: "a", metadata: { album: { media_group_id: "g1", run_id: "a" } } });
    }
    const [, run] = entry;
    expect(run.notBefore).toBe(1_900);
    expect(run.job.input).toEqual({ text: "caption", contents: [], attachments: [1, 2, 3].map((n) => ({ artifact_id: `art-${n}` })) });
    expect(run.job.album!.parts.map((p) => p.eventId)).toEqual(["evt-b", "evt-c", "evt-a"]);
    // The answer quotes the album's first item (message 1), not the first to arrive (3).
    expect(run.job.delivery!.target).toMatchObject({ replyToMessageId: 1 });
    // The same item again (its decision's write went unanswered) finds its run and changes nothing.
    let stored = 0;
    expect(joinAlbum(albumRunFor([entry], itemJob("c", 2), () => false)!, itemJob("c", 2), 1_000, 5_000, () => stored++).runId).toBe("a");
    expect(stored).toBe(0);
  });

  it("joins no run of another album, another agent, one that began or is full", () => {
    const table: RunTable = [head(itemJob("a", 1))];
    expect(albumRunFor(table, itemJob("b", 2, { group: "g2" }), joinable)).toBeUndefined();
    expect(albumRunFor(table, itemJob("b", 2, { agentId: "other" }), joinable)).toBeUndefined();
    expect(albumRunFor(table, itemJob("b", 2), () => false)).toBeUndefined();
    expect(albumRunFor([[table[0][0], { ...table[0][1], state: "running" }]], itemJob("b", 2), joinable)).toBeUndefined();
    let entry: readonly [string, StoredRun] = table[0];
    for (let n = 2; n <= ALBUM_MAX_PARTS; n++) joinAlbum(entry, itemJob(`p${n}`, n), 1_000, 0, (key, run) => (entry = [key, run]));
    expect(entry[1].job.album!.parts).toHaveLength(ALBUM_MAX_PARTS);
    expect(albumRunFor([entry], itemJob("late", 99), joinable)).toBeUndefined();
  });
});

describe("album items on their way", () => {
  // An announced item may take 10 s + 10 s + 5 s (getFile, the download, its put in R2) + 15 s (its recording) to arrive.
  const config = { ALBUM_WAIT_MS: 1_000, PLATFORM_API_TIMEOUT_MS: 10_000, INPUT_ATTACHMENT_FETCH_TIMEOUT_MS: 10_000, DB_QUERY_TIMEOUT_MS: 15_000, BLOB_OP_TIMEOUT_MS: 5_000 } as Config;
  afterEach(() => vi.useRealTimers());

  it("hold their album's run until they arrive, are withdrawn, or have taken as long as their ingress may", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(100_000);
    const runs = new RunTableStore(new MemStorage() as unknown as DurableObjectStorage);
    const albums = new AlbumGathering(runs, () => config, () => true, (work) => work(), () => {});
    const notBefore = async () => (await runs.entries())[0][1].notBefore;
    // b is on its way when a, the first to arrive, begins the album's run: the run waits for b, not only 1 s.
    await albums.announce("g1", "evt-b", 1);
    const a = itemJob("a", 1, { text: "caption" });
    expect(albums.join(await runs.entries(), a, 100_000)).toBeNull();
    await runs.put("run:a", albums.timed(waitingRun(a, "enqueue", 100_000, 1_000), 100_000));
    expect(await notBefore()).toBe(140_000);
    // b arrives at 103 s and joins: the run waits 1 s more, for b no longer.
    vi.setSystemTime(103_000);
    expect(albums.join(await runs.entries(), itemJob("b", 2), 103_000)?.disposition).toBe("merged");
    expect(await notBefore()).toBe(104_000);
    // c is announced, then its ingress fails: the run is held, then released.
    await albums.announce("g1", "evt-c", 1);
    expect(await notBefore()).toBe(143_000);
    await albums.withdraw("evt-c");
    expect(await notBefore()).toBe(104_000);
    // d is announced and never comes (its Worker went away): past its bound it holds nothing.
    await albums.announce("g1", "evt-d", 1);
    const [, held] = (await runs.entries())[0];
    expect([held.notBefore, albums.timed(held, 143_001).notBefore]).toEqual([143_000, 104_000]);
    // Another album's item, or one already gathered (b sent again), holds nothing.
    await albums.withdraw("evt-d");
    await albums.announce("g2", "evt-x", 1);
    await albums.announce("g1", "evt-b", 1);
    expect(await notBefore()).toBe(104_000);
  });
});

describe("an album's item bound to an agent created anew under its id", () => {
  const config = { ALBUM_WAIT_MS: 1_000, PLATFORM_API_TIMEOUT_MS: 10_000, INPUT_ATTACHMENT_FETCH_TIMEOUT_MS: 10_000, DB_QUERY_TIMEOUT_MS: 15_000, BLOB_OP_TIMEOUT_MS: 5_000 } as Config;
  const ofEpoch = (job: RunJob, stateEpoch: string) => ({ ...job, agent: { ...job.agent, stateEpoch } });
  afterEach(() => vi.useRealTimers());

  it("joins no run of the agent deleted, and holds it no more once it arrived", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(100_000);
    const runs = new RunTableStore(new MemStorage() as unknown as DurableObjectStorage);
    const albums = new AlbumGathering(runs, () => config, () => true, (work) => work(), () => {});
    const a = ofEpoch(itemJob("a", 1), "old");
    await runs.put("run:a", albums.timed(waitingRun(a, "enqueue", 100_000, 1_000), 100_000));
    // b, of the agent created anew, is announced (holding the album's run) and arrives: it starts a run of its own.
    await albums.announce("g1", "evt-b", 1);
    expect((await runs.entries())[0][1].notBefore).toBe(140_000);
    const b = ofEpoch(itemJob("b", 2), "new");
    expect(albumRunFor(await runs.entries(), b, joinable)).toBeUndefined();
    expect(albums.join(await runs.entries(), b, 100_500)).toBeNull();
    const [, left] = (await runs.entries())[0];
    expect([left.notBefore, left.job.album!.parts.map((p) => p.runId)]).toEqual([101_000, ["a"]]);
    // The agent as created, or a job stored before epochs existed, still joins.
    expect(albumRunFor(await runs.entries(), ofEpoch(itemJob("c", 3), "old"), joinable)?.[0]).toBe("run:a");
    expect(albumRunFor(await runs.entries(), itemJob("c", 3), joinable)?.[0]).toBe("run:a");
  });
});
