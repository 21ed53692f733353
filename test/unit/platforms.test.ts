import { createCipheriv, createHash, createHmac, randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { retryDelay } from "../../src/delivery/retry";
import { contentOf, normalizeLarkPayload } from "../../src/platforms/lark/normalize";
import { decryptLarkBody, openLarkRequest } from "../../src/platforms/lark/verify";
import { scrubSecrets, withoutPaths } from "../../src/platforms/redact";
import { normalizeEnvelope } from "../../src/platforms/slack/normalize";
import { verifySlackSignature } from "../../src/platforms/slack/verify";
import { REPLY_CUT_NOTICE, splitMessage, splitReply } from "../../src/platforms/split";
import { normalizeUpdate } from "../../src/platforms/telegram/normalize";
import { normalizeInteraction } from "../../src/platforms/discord/normalize";

describe("splitReply", () => {
  it("is splitMessage up to maxParts parts, and past them ends with the cut notice after maxParts - 1 parts", () => {
    const words = (n: number) => Array.from({ length: n }, (_, i) => `w${i}`).join(" ");
    for (const text of [words(10), words(200), "```ts\n" + "const x = 1;\n".repeat(40) + "```\n" + words(30)]) {
      const whole = splitMessage(text, 50);
      const capped = splitReply(text, 50, 8);
      if (whole.length <= 8) expect(capped).toEqual(whole);
      else expect(capped).toEqual([...whole.slice(0, 7), REPLY_CUT_NOTICE]);
    }
  });
  it("splits only the text's start, so a reply of megabytes costs what its first parts cost", () => {
    const huge = "x ".repeat(4 * 1024 * 1024);
    const parts = splitReply(huge, 4096, 20);
    expect(parts).toHaveLength(20);
    expect(parts.slice(0, 19)).toEqual(splitMessage(huge.slice(0, 100_000), 4096).slice(0, 19));
  });
});

describe("splitMessage", () => {
  it("keeps short text whole and joins back to the original", () => {
    expect(splitMessage("hello", 10)).toEqual(["hello"]);
    expect(splitMessage("", 10)).toEqual([""]);
    const text = "alpha beta gamma delta epsilon zeta eta theta";
    const parts = splitMessage(text, 12);
    expect(parts.join("")).toBe(text);
    expect(parts.every((p) => p.length <= 12)).toBe(true);
  });

  it("prefers a line break, then a space, in the second half of a part; else cuts hard", () => {
    expect(splitMessage("aaaaaa\nbbbbbbbbb", 10)).toEqual(["aaaaaa\n", "bbbbbbbbb"]);
    expect(splitMessage("aaaaaaa bbbbbbbbb", 10)).toEqual(["aaaaaaa ", "bbbbbbbbb"]);
    expect(splitMessage("a bbbbbbbbbbbbbbbbbb", 10)).toEqual(["a bbbbbbbb", "bbbbbbbbbb"]);
  });

  it("closes a code fence a part ends inside, and opens it again (with its language) in the next", () => {
    const code = Array.from({ length: 30 }, (_, i) => `const line${i} = ${i};`).join("\n");
    const text = `Here is the code:\n\n\`\`\`ts\n${code}\n\`\`\`\n\nThat is all.`;
    const parts = splitMessage(text, 200);
    expect(parts.length).toBeGreaterThan(3);
    expect(parts.every((p) => p.length <= 200)).toBe(true);
    // Every part has balanced fences, and every part after the first that continues the block reopens it as ts.
    for (const p of parts) expect((p.match(/^\`\`\`/gm) ?? []).length % 2).toBe(0);
    for (const p of parts.slice(1, -1)) expect(p.startsWith("\`\`\`ts\n")).toBe(true);
    expect(parts.at(-1)).toContain("That is all.");
    // Less what the split added, the parts are the text.
    const joined = parts.map((p, i) => (i > 0 && p.startsWith("\`\`\`ts\n") ? p.slice(6) : p)).map((p, i, all) => (i < all.length - 1 ? p.replace(/\n?\`\`\`$/, "") : p)).join("");
    expect(joined.replace(/\n/g, "")).toBe(text.replace(/\n/g, ""));
    // Text without fences splits exactly as before.
    expect(splitMessage("aaaaaa\nbbbbbbbbb", 10)).toEqual(["aaaaaa\n", "bbbbbbbbb"]);
  });

  it("never makes an empty code block of one that only touches a cut", () => {
    const emptyBlock = /(^|\n) {0,3}```[^\n`]*\n {0,3}```(\n|$)/;
    // The closing fence falls just after where the part would end: it joins the part rather than be reopened and closed.
    const closing = "```py\n" + "a".repeat(186) + "\n```\n" + "tail ".repeat(300);
    const closingParts = splitMessage(closing, 200);
    expect(closingParts[0]).toBe("```py\n" + "a".repeat(186) + "\n```\n");
    // The opening fence is the last full line before the cut: it moves to the next part with its block.
    const opening = "x".repeat(100) + "\n```py\n" + "long_code_line ".repeat(20) + "\n```\nend";
    const openingParts = splitMessage(opening, 200);
    expect(openingParts[0]).toBe("x".repeat(100) + "\n");
    expect(openingParts[1].startsWith("```py\nlong_code_line ")).toBe(true);
    for (const parts of [closingParts, openingParts]) {
      expect(parts.filter((p) => emptyBlock.test(p))).toEqual([]);
      expect(parts.every((p) => p.length <= 200)).toBe(true);
    }
  });

  it("takes a code block written on one line (```npm ci```) for no fence: nothing added around it, nor reopened after it", () => {
    const text = "Run ```npm ci``` first:\n```npm ci```\n" + "then the tests, ".repeat(40);
    const parts = splitMessage(text, 200);
    expect(parts.length).toBeGreaterThan(2);
    expect(parts.join("")).toBe(text);
  });

  it("leaves room in a last part still inside a code block (a draft's) for the closing line its messenger shows", () => {
    // 200 as it is; 204 once shown closed (Slack's mrkdwn adds "\n```").
    const draft = "```\n" + "a ".repeat(98);
    const parts = splitMessage(draft, 200);
    expect(parts).toHaveLength(2);
    expect(parts[0].endsWith("\n```")).toBe(true);
    expect(parts[1].length + "\n```".length).toBeLessThanOrEqual(200);
    // A block closed, or text without one, fits as before.
    expect(splitMessage("```\n" + "a ".repeat(96) + "\n```", 200)).toHaveLength(1);
    expect(splitMessage("``\n" + "a ".repeat(98) + "b", 200)).toHaveLength(1);
  });

  it("never reopens a fence with half a surrogate pair cut from its info string", () => {
    const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
    // The emoji sits across the opener's cut: "```typescript " is 14 code units.
    const text = "```typescript 🚀 deploy script\n" + Array.from({ length: 200 }, (_, i) => `const step${i} = run(${i});`).join("\n") + "\n```\n";
    const parts = splitMessage(text, 4096);
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts.slice(1)) expect(part.startsWith("```typescript \n")).toBe(true);
    for (const part of parts) expect(part).not.toMatch(loneSurrogate);
  });

  it("splits a growing fenced text the same way: earlier parts stay stable once full", () => {
    const full = `\`\`\`py\n${"print(1)\n".repeat(80)}\`\`\``;
    const early = splitMessage(full.slice(0, 400), 120);
    const late = splitMessage(full, 120);
    expect(late.slice(0, early.length - 1)).toEqual(early.slice(0, -1));
  });

  it("never cuts a surrogate pair", () => {
    const text = "x".repeat(9) + "😀" + "y".repeat(5);
    const parts = splitMessage(text, 10);
    expect(parts[0]).toBe("x".repeat(9));
    expect(parts.join("")).toBe(text);
  });

  it("splits a growing text the same way: earlier parts stay stable once full", () => {
    const full = "word ".repeat(40);
    const early = splitMessage(full.slice(0, 130), 50);
    const late = splitMessage(full, 50);
    expect(late.slice(0, early.length - 1)).toEqual(early.slice(0, -1));
  });

  it("starts a part that goes on with a table with the table's header again, in or out of a code block; never ends one on a header without rows", () => {
    const rows = Array.from({ length: 12 }, (_, i) => `| ${i} | ${i * i} |`).join("\n");
    expect(splitMessage(`Squares:\n| n | n² |\n|---|--:|\n${rows}\nDone.`, 100)).toEqual([
      "Squares:\n| n | n² |\n|---|--:|\n| 0 | 0 |\n| 1 | 1 |\n| 2 | 4 |\n| 3 | 9 |\n| 4 | 16 |\n| 5 | 25 |\n",
      "| n | n² |\n|---|--:|\n| 6 | 36 |\n| 7 | 49 |\n| 8 | 64 |\n| 9 | 81 |\n| 10 | 100 |\n| 11 | 121 |\nDone.",
    ]);
    // An aligned table (../markdown/table-text.ts) in its code block: the block reopened, its header and rule with it.
    const block = ["```", "n  │  n²", "───┼────", ...Array.from({ length: 12 }, (_, i) => `${String(i).padEnd(2)} │ ${String(i * i).padStart(3)}`), "```"].join("\n");
    const parts = splitMessage(block, 100);
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts.slice(1)) expect(part.startsWith("```\nn  │  n²\n───┼────\n")).toBe(true);
    // A header (and its delimiter row) the cut would leave alone goes to the next part with its rows.
    const table = "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |";
    expect(splitMessage(`${"x".repeat(70)}\n${table}`, 100)).toEqual([`${"x".repeat(70)}\n`, table]);
    expect(splitMessage(`${"x".repeat(80)}\n${table}`, 100)).toEqual([`${"x".repeat(80)}\n`, table]);
  });
});

describe("retryDelay", () => {
  const policy = { maxAttempts: 4, baseMs: 500, maxRetryAfterMs: 60_000 };
  it("waits what a rate limit asks, backs off on transient errors, gives up on permanent ones and at the bound", () => {
    expect(retryDelay(policy, { kind: "rate_limited", status: 429, code: "x", message: "", retryAfterMs: 3000 }, 1)).toBe(3000);
    expect(retryDelay(policy, { kind: "rate_limited", status: 429, code: "x", message: "" }, 2)).toBe(1000);
    expect(retryDelay(policy, { kind: "transient", status: 502, code: "x", message: "" }, 3)).toBe(2000);
    expect(retryDelay(policy, { kind: "permanent", status: 400, code: "x", message: "" }, 1)).toBeNull();
    expect(retryDelay(policy, { kind: "transient", status: 502, code: "x", message: "" }, 4)).toBeNull();
    expect(retryDelay(policy, { kind: "rate_limited", status: 429, code: "x", message: "", retryAfterMs: 120_000 }, 1)).toBeNull();
  });
});

describe("Slack signatures", () => {
  const secret = "signing-secret-0123456789";
  const body = '{"type":"event_callback"}';
  const headers = (ts: number, sig?: string) => new Headers({ "x-slack-request-timestamp": String(ts), "x-slack-signature": sig ?? `v0=${createHmac("sha256", secret).update(`v0:${ts}:${body}`).digest("hex")}` });
  it("accepts a fresh, correct signature and refuses stale or wrong ones", async () => {
    const now = Date.now();
    const ts = Math.floor(now / 1000);
    await expect(verifySlackSignature(headers(ts), body, secret, now)).resolves.toBeUndefined();
    await expect(verifySlackSignature(headers(ts - 301), body, secret, now)).rejects.toMatchObject({ status: 401 });
    await expect(verifySlackSignature(headers(ts + 301), body, secret, now)).rejects.toMatchObject({ status: 401 });
    await expect(verifySlackSignature(headers(ts, "v0=00"), body, secret, now)).rejects.toMatchObject({ status: 401 });
    await expect(verifySlackSignature(headers(ts), `${body} `, secret, now)).rejects.toMatchObject({ status: 401 });
  });
});

describe("Lark encryption", () => {
  const key = "encrypt-key-123";
  const encrypt = (text: string) => {
    const iv = randomBytes(16);
    const c = createCipheriv("aes-256-cbc", createHash("sha256").update(key).digest(), iv);
    return Buffer.concat([iv, c.update(text, "utf8"), c.final()]).toString("base64");
  };
  it("decrypts AES-256-CBC with key SHA-256(encrypt key) and the IV in front", async () => {
    expect(await decryptLarkBody(key, encrypt('{"hi":"飞书"}'))).toBe('{"hi":"飞书"}');
    await expect(decryptLarkBody("other-key", encrypt('{"hi":1}'))).rejects.toBeDefined();
  });

  it("checks the verification token in plain mode", async () => {
    const body = JSON.stringify({ type: "url_verification", token: "vt", challenge: "c" });
    await expect(openLarkRequest(new Headers(), body, { verification_token: "vt" }, Date.now())).resolves.toMatchObject({ challenge: "c" });
    await expect(openLarkRequest(new Headers(), body, { verification_token: "other" }, Date.now())).rejects.toMatchObject({ status: 401 });
  });
});

describe("normalisation", () => {
  it("Telegram: a topic message, its thread and reply target", () => {
    const [ev] = normalizeUpdate({ update_id: 5, message: { message_id: 9, date: 1, chat: { id: -1, type: "supergroup" }, from: { id: 2, first_name: "A" }, text: "hi", message_thread_id: 3, is_topic_message: true } });
    expect(ev).toMatchObject({ key: "5", eventType: "message.received", conversationId: "-1", threadId: "3", replyTarget: { platform: "telegram", chatId: "-1", messageThreadId: 3, replyToMessageId: 9 } });
  });

  it("Slack: message keyed by channel and ts, bot messages unhandled", () => {
    const env = (event: Record<string, unknown>) => ({ type: "event_callback", event_id: "Ev1", event: { type: "message", ...event } });
    expect(normalizeEnvelope(env({ channel: "C", ts: "1.2", user: "U", text: "x" }), "k")[0]).toMatchObject({ key: "msg:C:1.2", eventType: "message.received" });
    expect(normalizeEnvelope(env({ channel: "C", ts: "1.3", bot_id: "B", text: "x" }), "k")[0]).toMatchObject({ key: "Ev1", eventType: null });
  });

  it("Lark: text, rich text and file contents", () => {
    expect(contentOf("text", '{"text":"hi"}')).toEqual({ text: "hi", files: [] });
    expect(contentOf("post", JSON.stringify({ zh_cn: { title: "T", content: [[{ tag: "text", text: "a" }, { tag: "img", image_key: "k" }]] } }))).toEqual({ text: "T\na", files: [{ ref: "image:k", artifactType: "image" }] });
    expect(contentOf("file", '{"file_key":"f","file_name":"n.pdf"}').files).toEqual([{ ref: "file:f", name: "n.pdf", artifactType: "file" }]);
    expect(normalizeLarkPayload({ uuid: "u1", type: "event_callback", event: { type: "message" } }, "k")[0]).toMatchObject({ key: "u1", eventType: null });
  });

  it("Lark: mention placeholders become names, by their exact keys", () => {
    const textOf = (text: string, mentions: { key: string; name?: string }[]) =>
      normalizeLarkPayload(
        {
          header: { event_id: "e", event_type: "im.message.receive_v1" },
          event: { sender: { sender_type: "user" }, message: { message_id: "m", chat_id: "c", message_type: "text", content: JSON.stringify({ text }), mentions } },
        },
        "k",
      )[0].text;
    const mentions = [{ key: "@_user_1", name: "Bot" }, { key: "@_user_10", name: "Ada" }, { key: "@_all", name: "all" }, { key: "@_user_2" }];
    expect(textOf("@_user_1 ask @_user_10, @_all and @_user_2", mentions)).toBe("@Bot ask @Ada, @all and @_user_2");
    // A placeholder directly followed by digits is still the mention it names.
    expect(textOf("@_user_123", [{ key: "@_user_1", name: "Bot" }])).toBe("@Bot23");
    expect(textOf("no mentions here", [])).toBe("no mentions here");
  });

  it("Discord: a command with a subcommand reads as typed, its path kept", () => {
    const [ev] = normalizeInteraction({ id: "1", type: 2, token: "t", channel_id: "C", data: { name: "ai", options: [{ name: "ask", type: 1, options: [{ name: "q", type: 3, value: "why?" }] }] } });
    expect(ev).toMatchObject({ text: "/ai ask why?", data: { command: { name: "ai", path: ["ask"], options: { q: "why?" } } } });
  });

  it("keeps a command option named __proto__ as an option", () => {
    const [ev] = normalizeInteraction({ id: "1", type: 2, token: "t", channel_id: "C", data: { name: "ai", options: [{ name: "__proto__", type: 3, value: "x" }] } });
    expect(JSON.stringify((ev.data as { command: unknown }).command)).toBe('{"name":"ai","path":[],"options":{"__proto__":"x"}}');
  });
});

describe("redaction", () => {
  it("removes secret fields by path and scrubs credential values from text", () => {
    expect(withoutPaths({ token: "t", header: { token: "t", id: 1 }, a: 1 }, [["token"], ["header", "token"]])).toEqual({ header: { id: 1 }, a: 1 });
    expect(scrubSecrets("bad bot 123:abcdef in url", { bot_token: "123:abcdef", short: "ab" })).toBe("bad bot [redacted] in url");
  });
});

describe("normalisation keeps what the user meant", () => {
  it("Telegram: an anonymous group admin speaks as the group, not as Telegram's shared placeholder bot", () => {
    const update = (chatId: number) => ({
      update_id: chatId * -1,
      message: {
        message_id: 4,
        date: 1,
        chat: { id: chatId, type: "supergroup" },
        from: { id: 1087968824, is_bot: true, first_name: "Group", username: "GroupAnonymousBot" },
        sender_chat: { id: chatId, type: "supergroup", title: `G${chatId}` },
        text: "an admin speaking",
      },
    });
    const [a] = normalizeUpdate(update(-100123));
    const [b] = normalizeUpdate(update(-100456));
    expect(a.eventType).toBe("message.received");
    expect(a.actor).toMatchObject({ actor_type: "chat", actor_id: "-100123", actor_name: "G-100123" });
    // Actor-scoped state is keyed by (type, id): two groups' anonymous admins never share it.
    expect(b.actor?.actor_id).toBe("-100456");
  });

  it("Telegram: a hyperlinked span keeps its target, in text and captions", () => {
    const msg = (extra: Record<string, unknown>) => normalizeUpdate({ update_id: 1, message: { message_id: 2, date: 1, chat: { id: 5, type: "private" }, from: { id: 5, is_bot: false, first_name: "A" }, ...extra } })[0];
    const linked = msg({
      text: "summarize this article please, 😀 and https://x.example",
      entities: [
        { type: "text_link", offset: 10, length: 12, url: "https://example.com/article/42" },
        { type: "bold", offset: 0, length: 9 },
        { type: "url", offset: 38, length: 17 },
      ],
    });
    expect(linked.text).toBe("summarize this article (https://example.com/article/42) please, 😀 and https://x.example");
    expect(msg({ caption: "see 😀 here", caption_entities: [{ type: "text_link", offset: 7, length: 4, url: "https://e.example/" }] }).text).toBe("see 😀 here (https://e.example/)");
    // An entity past the text (a malformed update) is ignored, never throws.
    expect(msg({ text: "short", entities: [{ type: "text_link", offset: 3, length: 10, url: "https://e.example/" }] }).text).toBe("short");
  });

  it("Lark: a rich-text link keeps its target and a code block stays a fenced block", () => {
    const post = {
      zh_cn: {
        title: "",
        content: [
          [{ tag: "text", text: "why does this fail? see " }, { tag: "a", text: "the docs", href: "https://example.com/docs/page" }, { tag: "a", text: "https://e.example", href: "https://e.example" }],
          [{ tag: "code_block", language: "GO", text: 'func main() {\n\tpanic("boom")\n}\n' }],
        ],
      },
    };
    expect(contentOf("post", JSON.stringify(post)).text).toBe('why does this fail? see the docs (https://example.com/docs/page)https://e.example\n```go\nfunc main() {\n\tpanic("boom")\n}\n```');
  });
});

describe("splitMessage and indented fences", () => {
  it("closes and reopens a fenced block indented in a list item, as it does one at the margin", () => {
    const lines = Array.from({ length: 40 }, (_, i) => `   npm install some-package-number-${i}`).join("\n");
    const text = `Steps:\n1. Install the packages:\n   \`\`\`bash\n${lines}\n   \`\`\`\n2. Start the server.`;
    const parts = splitMessage(text, 500);
    expect(parts.length).toBeGreaterThan(2);
    for (const part of parts) expect(part.length).toBeLessThanOrEqual(500);
    // Each part renders on its own: an even number of fence lines, and every part after the first reopens with the indent and language.
    for (const part of parts) expect((part.match(/^ {0,3}```/gm) ?? []).length % 2).toBe(0);
    for (const part of parts.slice(1, -1)) expect(part.startsWith("   ```bash\n")).toBe(true);
  });
});
