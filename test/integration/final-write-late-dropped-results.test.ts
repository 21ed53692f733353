import { beforeAll, describe, expect, it } from "vitest";
import type { FakePlatform } from "../support/chat-host";
import { messageEvent, type TestHost } from "../support/host";
import { waitFor } from "../support/fake-platform";
import { startAdHocRunner } from "../support/runner";
import { telegramCallsAnsweredAsSent, useTelegramBotHost } from "../support/telegram-bot-host";
import { holdFinalWriteThenHostFailureEnd } from "../support/unanswered-final-write";

/**
 * A chat reply fed from the run's ledger as read back from the database (its final write applied but answered
 * late; the same path serves a reply resumed by a new instance) must show what the host accepted, as the live reply
 * does: an `artifact.created` the host refused (another conversation's artifact) is not announced (README,
 * Artifacts: "chat delivery does not announce it"), and a message.completed the host dropped is not shown.
 */
let foreignArtifact = "";

const bot = useTelegramBotHost({
  agentId: "replay-dropped",
  botName: "tg",
  api: telegramCallsAnsweredAsSent(),
  vars: { DB_QUERY_TIMEOUT_MS: "2000" },
  startRunner: () => startAdHocRunner({
    name: "replay-dropped",
    runners: [{ name: "default", label: { en_US: "x" }, capabilities: {}, permissions: { artifacts: ["metadata", "read"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const text = String(ctx.input.text ?? "");
      const line = (type: string, data: unknown, sequence: number) => `${JSON.stringify({ run_id: ctx.run_id, type, data, sequence })}\n`;
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      // Everything in one write: one batch, the run's final one.
      if (text.startsWith("foreign")) {
        res.end(
          line("artifact.created", { artifact_type: "file", artifact_id: foreignArtifact }, 1) +
            line("message.completed", { message: { role: "assistant", content: `answer ${text}` } }, 2) +
            line("run.completed", { finish_reason: "stop" }, 3),
        );
      } else {
        // A strict payload with an unknown key: dropped by the host (§7), never in the transcript.
        res.end(
          line("message.completed", { message: { role: "assistant", content: "DROPPED DRAFT" }, not_a_field: true }, 1) +
            line("message.completed", { message: { role: "assistant", content: `answer ${text}` } }, 2) +
            line("run.completed", { finish_reason: "stop" }, 3),
        );
      }
    },
  }),
});
let host: TestHost;
let fake: FakePlatform;
beforeAll(async () => {
  ({ host, fake } = bot);
  // An artifact of another conversation (an API event nothing binds still stores its attachment).
  const other = await host.postEvent(messageEvent("someone-else", "mine", { input: { text: "mine", attachments: [{ content_base64: Buffer.from("private").toString("base64"), name: "private.pdf", mime_type: "application/pdf" }] } }));
  expect(other.status).toBe(202);
  foreignArtifact = (await host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact WHERE name = 'private.pdf'"))[0].artifact_id;
});

let updateId = 7000;
async function say(chat: string, text: string) {
  const id = ++updateId;
  const res = await fetch(bot.webhookUrl, {
    method: "POST",
    headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": bot.secretToken },
    body: JSON.stringify({ update_id: id, message: { message_id: id, date: Math.floor(Date.now() / 1000), chat: { id: Number(chat), type: "group", title: "g" }, from: { id: 42, is_bot: false, first_name: "Ada" }, text } }),
  });
  expect(res.status).toBe(200);
}

/** The run's final write reaches the database, which applies it after the Worker gave up waiting (DB_QUERY_TIMEOUT_MS). */
async function withLateFinalWrite(chat: string, text: string) {
  // The host's fallback end lands after the late final write: it finds the run ended, and replays its ledger.
  await holdFinalWriteThenHostFailureEnd(host, `answer ${text}`, () => say(chat, text), 1_000);
  const [run] = await waitFor(async () => {
    const rows = await host.query<{ run_id: string; status: string }>("SELECT run_id, status FROM run WHERE conversation_id = ?", [chat]);
    return rows[0]?.status === "completed" && rows;
  });
  // The reply settles: its text reached the chat.
  await waitFor(() => fake.callsTo(/\/sendMessage$/).some((c) => String(c.body.chat_id) === chat && c.body.text === `answer ${text}`), 15_000, "the answer");
  await new Promise((r) => setTimeout(r, 1_500));
  return run.run_id;
}

describe("a reply replayed from the recorded ledger", () => {
  it("does not try to post an artifact.created the host refused (another conversation's file)", async () => {
    const chat = "-1008801";
    const runId = await withLateFinalWrite(chat, "foreign-late");
    // The host refused the reference: its result was dropped and no transcript item names it.
    const warnings = await host.query<{ data_json: string }>("SELECT data_json FROM run_event WHERE run_id = ? AND type = 'host.warning'", [runId]);
    expect(warnings.some((w) => w.data_json.includes("another conversation"))).toBe(true);
    const failed = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]);
    const fileSends = fake.callsTo(/\/send(Document|Photo)$/).filter((c) => c.raw.includes(chat));
    expect({ failed: failed.map((f) => JSON.parse(f.data_json).code ?? JSON.parse(f.data_json)), fileSends: fileSends.length }).toEqual({ failed: [], fileSends: 0 });
  }, 40_000);

  it("does not show a message.completed the host dropped", async () => {
    const chat = "-1008802";
    await withLateFinalWrite(chat, "dropped-late");
    const sends = fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chat).map((c) => c.body.text);
    expect(sends).toEqual(["answer dropped-late"]);
  }, 40_000);
});
