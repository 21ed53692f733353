import { describe, expect, it } from "vitest";
import { artifactAccess, artifactTypeOf } from "../../src/artifacts/policy";
import { readCapped } from "../../src/artifacts/read-capped";
import { deliveredFileName } from "../../src/delivery/file-name";
import { base64ToBytes, bytesToBase64 } from "../../src/lib/base64";
import { EventEnvelopeSchema } from "../../src/protocol/envelope";

describe("artifact access", () => {
  const row = { conversationKey: "//c1/", runId: "run_a", expiresAt: 2_000 };
  it("grants the artifact's conversation and the run that made it, until expiry", () => {
    expect(artifactAccess(row, { conversationKey: "//c1/" }, 1_000)).toBe("granted");
    expect(artifactAccess({ ...row, conversationKey: null }, { conversationKey: "//c2/", runId: "run_a" }, 1_000)).toBe("granted");
    expect(artifactAccess(row, { conversationKey: "//c2/", runId: "run_b" }, 1_000)).toBe("other_conversation");
    expect(artifactAccess(row, { conversationKey: "//c1/" }, 2_000)).toBe("expired");
    expect(artifactAccess({ ...row, expiresAt: null }, { conversationKey: "//c1/" }, Number.MAX_SAFE_INTEGER)).toBe("granted");
  });

  it("refuses one private to other eyes than the run's answer (README \"Who sees what in a group chat\"), expired or not", () => {
    expect(artifactAccess({ ...row, otherAudience: true }, { conversationKey: "//c1/" }, 1_000)).toBe("other_audience");
    // Expired: refused the same, so the refusal tells nothing of it.
    expect(artifactAccess({ ...row, otherAudience: true }, { conversationKey: "//c1/" }, 2_000)).toBe("other_audience");
    expect(artifactAccess({ ...row, otherAudience: true }, { conversationKey: "//c2/" }, 1_000)).toBe("other_conversation");
    expect(artifactAccess({ ...row, otherAudience: false }, { conversationKey: "//c1/" }, 1_000)).toBe("granted");
  });

  it("derives types from MIME", () => {
    expect([artifactTypeOf("image/png"), artifactTypeOf("audio/ogg"), artifactTypeOf("application/pdf"), artifactTypeOf(null)]).toEqual(["image", "audio", "file", "file"]);
  });
});

describe("the name a file goes to a chat under", () => {
  it("adds its type's extension to a name that has none, and leaves one that has an extension as it is", () => {
    expect(deliveredFileName(null, "art_1", "image/png")).toBe("art_1.png");
    expect(deliveredFileName(null, "art_1", "Image/JPEG; q=1")).toBe("art_1.jpg");
    expect(deliveredFileName("v1.2 notes", "art_1", "text/plain")).toBe("v1.2 notes.txt");
    expect(deliveredFileName("voice", "art_1", "audio/ogg; codecs=opus")).toBe("voice.ogg");
    expect(deliveredFileName("draft.", "art_1", "application/pdf")).toBe("draft.pdf");
    expect(deliveredFileName("photo.JPG", "art_1", "image/png")).toBe("photo.JPG");
    expect(deliveredFileName(".env", "art_1", "text/plain")).toBe(".env");
    // No extension to give: as stored.
    expect(deliveredFileName(null, "art_1", "application/octet-stream")).toBe("art_1");
    expect(deliveredFileName("blob", "art_1", null)).toBe("blob");
    expect(deliveredFileName("page", "art_1", "text/x-something-long")).toBe("page");
  });
});

describe("readCapped", () => {
  const chunked = (sizes: number[]) =>
    new Response(new ReadableStream({ start(c) { for (const n of sizes) c.enqueue(new Uint8Array(n)); c.close(); } }));
  it("reads up to the cap and refuses past it, declared or not", async () => {
    expect((await readCapped(chunked([3, 4]), 7)) as Uint8Array).toHaveLength(7);
    expect(await readCapped(chunked([3, 4, 1]), 7)).toBe("too_large");
    expect(await readCapped(new Response("12345678", { headers: { "content-length": "8" } }), 7)).toBe("too_large");
  });
});

describe("base64", () => {
  it("round-trips bytes larger than one conversion slice", () => {
    const bytes = Uint8Array.from({ length: 40_000 }, (_, i) => (i * 7) & 0xff);
    expect(bytesToBase64(bytes)).toBe(Buffer.from(bytes).toString("base64"));
    expect(base64ToBytes(bytesToBase64(bytes))).toEqual(bytes);
  });
});

describe("envelope attachments", () => {
  const envelope = (attachments: unknown[]) => ({ event_type: "message.received", conversation_id: "c", actor: { actor_type: "user" }, input: { attachments } });
  it("takes exactly one of content_base64, url or artifact_id", () => {
    expect(EventEnvelopeSchema.safeParse(envelope([{ content_base64: "aGk=", name: "hi.txt" }])).success).toBe(true);
    expect(EventEnvelopeSchema.safeParse(envelope([{ url: "https://example.com/a.png", mime_type: "image/png" }])).success).toBe(true);
    expect(EventEnvelopeSchema.safeParse(envelope([{ artifact_id: "art_1" }])).success).toBe(true);
    expect(EventEnvelopeSchema.safeParse(envelope([{ name: "nothing.txt" }])).success).toBe(false);
    expect(EventEnvelopeSchema.safeParse(envelope([{ artifact_id: "art_1", url: "https://example.com/a" }])).success).toBe(false);
    expect(EventEnvelopeSchema.safeParse(envelope([{ content_base64: "aGk=", size_bytes: 2 }])).success).toBe(false);
    expect(EventEnvelopeSchema.safeParse(envelope(Array.from({ length: 17 }, () => ({ artifact_id: "a" })))).success).toBe(false);
  });
});
