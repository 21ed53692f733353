import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sayOnTelegram, waitFor } from "../support/fake-platform";
import { startTelegramChat } from "../support/telegram-chat";

/**
 * What the user was shown as the answer is what the host records (PROTOCOL §7): an answer streamed as
 * message.delta and ended by run.completed without a message is the run's message (it was shown as the final
 * answer, so it is not `runner.no_output`); run.completed carrying a final message after an interim one keeps
 * both, in the transcript, the run view and the chat; one repeating the last message adds nothing.
 */
let chat: Awaited<ReturnType<typeof startTelegramChat>>;

beforeAll(async () => {
  chat = await startTelegramChat("final-message");
});
afterAll(async () => {
  await chat?.dispose();
});

/** Says `text` in a chat of its own; the run, its assistant transcript and what the chat was sent, once delivered. */
async function answerTo(chatId: string, text: string) {
  expect((await sayOnTelegram(chat.webhookUrl, chat.secretToken, chatId, text)).status).toBe(200);
  const runId: string = await waitFor(async () => (await chat.host.admin("GET", `/v1/runs?conversation_id=${chatId}`)).body.items[0]?.run_id, 10_000, "the run");
  const run = await chat.host.waitForRun(runId);
  await waitFor(async () => (await chat.trail(runId)).some((r) => r.type === "delivery.succeeded" || r.type === "delivery.failed"), 10_000, "its delivery");
  const transcript = (await chat.host.query<{ content: string }>("SELECT content FROM transcript WHERE run_id = ? AND role = 'assistant' ORDER BY seq", [runId])).map((r) => r.content);
  const sent = chat.fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chatId).map((c) => c.body.text);
  return { status: run.status, error: run.error?.code ?? null, message: run.message?.content ?? null, transcript, sent };
}

describe("the run's final message", () => {
  it("an answer streamed as deltas and never completed is recorded as shown, not failed as no output", async () => {
    const got = await answerTo("-78001", "deltasonly Your order ships on Friday.");
    const edits = chat.fake.callsTo(/\/editMessageText$/).filter((c) => String(c.body.chat_id) === "-78001").map((c) => c.body.text);
    expect([...got.sent, ...edits].at(-1)).toBe("Your order ships on Friday.");
    expect(got).toMatchObject({ status: "completed", error: null, message: "Your order ships on Friday.", transcript: ["Your order ships on Friday."] });
  });

  it("run.completed's message after an interim one is kept and shown after it", async () => {
    const got = await answerTo("-78002", "final Checking your order, one moment… | Your refund of 40 EUR was issued today.");
    expect(got).toEqual({
      status: "completed",
      error: null,
      message: "Your refund of 40 EUR was issued today.",
      transcript: ["Checking your order, one moment…", "Your refund of 40 EUR was issued today."],
      sent: ["Checking your order, one moment…", "Your refund of 40 EUR was issued today."],
    });
  });

  it("run.completed repeating the last message adds nothing, however the runner wrote it (key order, a stripped key)", async () => {
    for (const [chatId, said] of [["-78003", "final Done. | Done."], ["-78004", "samefinal Done."]]) {
      const got = await answerTo(chatId, said);
      expect(got).toEqual({ status: "completed", error: null, message: "Done.", transcript: ["Done."], sent: ["Done."] });
    }
  });
});

describe("the run's final message, on a chat the agent does not stream to", () => {
  beforeAll(async () => {
    const shown = await chat.host.admin("GET", "/v1/admin/agents/final-message");
    expect((await chat.host.admin("PUT", "/v1/admin/agents/final-message", { ...shown.body, delivery_policy: { streaming: false } })).status).toBe(200);
  });

  it("an answer streamed as deltas and never completed is sent whole, as the run records it", async () => {
    const got = await answerTo("-78011", "deltasonly Your order ships on Friday.");
    expect(got).toEqual({ status: "completed", error: null, message: "Your order ships on Friday.", transcript: ["Your order ships on Friday."], sent: ["Your order ships on Friday."] });
  });
});
