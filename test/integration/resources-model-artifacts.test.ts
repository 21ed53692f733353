import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeProvider } from "../support/fake-provider";
import { startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * A user's image, document or voice note reaches a runner by reference (`{type: "image" | "file" | "audio",
 * artifact_id}` in `ctx.input.contents`, PROTOCOL §5), and a model message's content is a list of those elements (§7):
 * a runner passes what it was given to a host-held model, and the host sends it inline, read as `artifact.read` reads
 * it, in the OpenAI chat-completions part for it; what those parts cannot carry is refused before the provider is called.
 */
const PNG = Buffer.from("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489", "hex");
const KEY = "sk-vision-0123456789abcdef";
/** The isolate's budget for what model calls hold (RESOURCE_RESPONSE_BUDGET_BYTES), small here so an image's copies can cross it. */
const BUDGET = 256 * 1024;

let host: TestHost;
let provider: Awaited<ReturnType<typeof startFakeProvider>>;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  provider = await startFakeProvider({ keys: { "gpt-vision": KEY } });
  const runnerOf = (name: string, permissions: Record<string, string[]>) => ({ name, label: { en_US: name }, capabilities: { multimodal_input: true }, permissions });
  runner = await startScriptedRunner({
    name: "vision",
    runners: [runnerOf("default", { models: ["invoke", "stream"], artifacts: ["metadata", "read"] }), runnerOf("blind", { models: ["invoke", "stream"] })],
  });
  host = await startTestHost({ vars: { RESOURCE_RESPONSE_MAX_BYTES: String(BUDGET), RESOURCE_RESPONSE_BUDGET_BYTES: String(BUDGET) } });
  await runner.register(host);
  const model = await host.admin("POST", "/v1/admin/models", { model_id: "vision", name: "vision", kind: "llm", base_url: provider.baseUrl, api_key: KEY, model: "gpt-vision" });
  expect(model.status).toBe(201);
  await putAgent(host, { agent_id: "vision", runner_id: runner.runnerId(), resource_policy: { models: ["vision"] } });
  await putAgent(host, { agent_id: "blind", runner_id: runner.runnerId("blind"), scope: { type: "conversation", id: "img-blind" }, resource_policy: { models: ["vision"] } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await provider?.close();
});

/** An event carrying the image (and a text file), as a chat platform's photo arrives: stored, then passed by reference. */
const withImage = (withFile = true) => ({
  input: {
    attachments: [
      { content_base64: PNG.toString("base64"), name: "photo.png", mime_type: "image/png" },
      ...(withFile ? [{ content_base64: Buffer.from("not a picture").toString("base64"), name: "notes.txt", mime_type: "text/plain" }] : []),
    ],
  },
});
const imageOf = (ctx: any, mime: string) => ctx.input.attachments.find((a: any) => a.mime_type === mime).artifact_id;
const ask = (artifactId: string) => [{ role: "user", content: [{ type: "text", text: "what is in this picture?" }, { type: "image", artifact_id: artifactId }] }];

describe("an image named by artifact_id in a model call", () => {
  it("is sent to the provider inline, by model.invoke and model.stream alike", async () => {
    const before = provider.calls.length;
    const { result } = await runner.run(host, "img-main", async (api, ctx, _emit, raw) => {
      // The contents as the runner got them: text and image elements.
      const invoke = await api("model.invoke", { model_id: "vision", messages: [{ role: "user", content: ctx.input.contents }] });
      const stream = await raw("model.stream", { model_id: "vision", messages: ask(imageOf(ctx, "image/png")) });
      return { invoke: [invoke.status, invoke.body.data?.message?.role], stream: [stream.status, (await stream.text()).includes('"type":"completed"')] };
    }, withImage(false));
    expect(result).toEqual({ invoke: [200, "assistant"], stream: [200, true] });
    const sent = provider.calls.slice(before).map((c) => c.body.messages[0].content.filter((p: any) => p.type === "image_url").map((p: any) => p.image_url.url));
    expect(sent).toEqual([[`data:image/png;base64,${PNG.toString("base64")}`], [`data:image/png;base64,${PNG.toString("base64")}`]]);
  });

  it("is refused as artifact.read refuses it: without the artifacts API (403, audited), not an image (400), unknown (404); the provider is not called", async () => {
    const before = provider.calls.length;
    const call = async (api: any, artifactId: string) => {
      const answer = await api("model.invoke", { model_id: "vision", messages: ask(artifactId) });
      return [answer.status, answer.body.error?.code];
    };
    const { result: blind, runId } = await runner.run(host, "img-blind", async (api, ctx) => call(api, imageOf(ctx, "image/png")), withImage());
    const { result: seeing } = await runner.run(host, "img-main", async (api, ctx) => ({ text: await call(api, imageOf(ctx, "text/plain")), unknown: await call(api, "art_nope") }), withImage());
    expect({ blind, ...seeing }).toEqual({ blind: [403, "unauthorized"], text: [400, "invalid_argument"], unknown: [404, "not_found"] });
    expect(provider.calls.length).toBe(before);
    const denials = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'host_api.denied' AND run_id = ?", [runId]);
    expect(denials.map((d) => JSON.parse(d.data_json).action)).toEqual(["model.invoke"]);
  });

  it("is held once per element naming it (the request carries each copy): a call whose copies exceed the budget is refused 413, the provider not called", async () => {
    // 120 KiB, 160 KiB as base64: one copy fits the budget, two do not.
    const big = Buffer.concat([PNG, Buffer.alloc(120 * 1024 - PNG.length, 7)]);
    const before = provider.calls.length;
    const { result } = await runner.run(host, "img-main", async (api, ctx) => {
      const image = { type: "image", artifact_id: imageOf(ctx, "image/png") };
      const messages = [{ role: "user", content: [image] }, { role: "assistant", content: "a photo" }, { role: "user", content: [{ type: "text", text: "again:" }, image] }];
      const answer = await api("model.invoke", { model_id: "vision", messages });
      return [answer.status, answer.body.error?.code, (answer.body.error as { retryable?: boolean } | undefined)?.retryable ?? false];
    }, { input: { attachments: [{ content_base64: big.toString("base64"), name: "big.png", mime_type: "image/png" }] } });
    expect({ result, sent: provider.calls.length - before }).toEqual({ result: [413, "payload_too_large", false], sent: 0 });
  });
});

/** Bytes standing for each kind: the host sends them as stored, whatever they hold. */
const PDF = Buffer.from("%PDF-1.4 quarterly figures");
const WAV = Buffer.from("RIFF\x24\x00\x00\x00WAVEfmt a short greeting");
const MP3 = Buffer.from("ID3\x03\x00 a longer question");
const OGG = Buffer.from("OggS a voice note");
const b64 = (bytes: Buffer) => bytes.toString("base64");
const attached = (bytes: Buffer, name: string, mime_type: string) => ({ content_base64: b64(bytes), name, mime_type });
/** A document and recordings, as a chat platform's arrive: stored, then named in `ctx.input.contents`. */
const withMedia = {
  input: {
    attachments: [attached(PDF, "report.pdf", "application/pdf"), attached(WAV, "hello.wav", "audio/wav"), attached(MP3, "question.mp3", "audio/mpeg"), attached(OGG, "voice.ogg", "audio/ogg")],
  },
};
const idOf = (ctx: any, name: string) => ctx.input.attachments.find((a: any) => a.name === name).artifact_id;

describe("a file or audio element named by artifact_id in a model call", () => {
  it("is sent inline in the provider's part: a file as file_data under the element's name (else the stored one), audio as input_audio in its format", async () => {
    const before = provider.calls.length;
    const { result } = await runner.run(host, "media-main", async (api, ctx, _emit, raw) => {
      // The contents as the runner got them (text, file, audio elements), less the ogg voice note the API cannot take.
      const given = ctx.input.contents.filter((el: any) => el.artifact_id !== idOf(ctx, "voice.ogg"));
      const invoke = await api("model.invoke", { model_id: "vision", messages: [{ role: "user", content: given }] });
      const pdf = idOf(ctx, "report.pdf");
      const renamed = [{ type: "file", artifact_id: pdf, name: "Q3 report.pdf" }, { type: "file", artifact_id: pdf }, { type: "audio", artifact_id: idOf(ctx, "question.mp3") }];
      const stream = await raw("model.stream", { model_id: "vision", messages: [{ role: "system", content: "be brief" }, { role: "user", content: renamed }] });
      return { invoke: [invoke.status, invoke.body.data?.message?.role], stream: [stream.status, (await stream.text()).includes('"type":"completed"')] };
    }, withMedia);
    expect(result).toEqual({ invoke: [200, "assistant"], stream: [200, true] });
    const sent = provider.calls.slice(before).map((c) => c.body.messages.at(-1).content);
    const pdf = `data:application/pdf;base64,${b64(PDF)}`;
    expect(sent).toEqual([
      [
        { type: "text", text: expect.stringMatching(/^script-/) },
        { type: "file", file: { filename: "report.pdf", file_data: pdf } },
        { type: "input_audio", input_audio: { data: b64(WAV), format: "wav" } },
        { type: "input_audio", input_audio: { data: b64(MP3), format: "mp3" } },
      ],
      [
        { type: "file", file: { filename: "Q3 report.pdf", file_data: pdf } },
        { type: "file", file: { filename: "report.pdf", file_data: pdf } },
        { type: "input_audio", input_audio: { data: b64(MP3), format: "mp3" } },
      ],
    ]);
  });

  it("is refused 400 naming the element where the provider's parts cannot carry it (audio not wav or mp3, not audio, outside a user message), 403 without the artifacts API; the provider is not called", async () => {
    const before = provider.calls.length;
    const refusal = async (api: any, messages: unknown[]) => {
      const answer = await api("model.invoke", { model_id: "vision", messages });
      return { status: answer.status, code: answer.body.error?.code, message: answer.body.error?.message, details: answer.body.error?.details };
    };
    const { result } = await runner.run(host, "media-main", async (api, ctx) => {
      const [pdf, ogg] = [idOf(ctx, "report.pdf"), idOf(ctx, "voice.ogg")];
      const audio = (artifact_id: string) => ({ type: "audio", artifact_id });
      return {
        ogg: await refusal(api, [{ role: "user", content: [{ type: "text", text: "hear this" }, audio(ogg)] }]),
        pdfAsAudio: await refusal(api, [{ role: "user", content: [audio(pdf)] }]),
        oggAsImage: await refusal(api, [{ role: "user", content: [{ type: "image", artifact_id: ogg }] }]),
        fileFromAssistant: await refusal(api, [{ role: "user", content: "hi" }, { role: "assistant", content: [{ type: "file", artifact_id: pdf, name: "r.pdf" }] }]),
        audioInTool: await refusal(api, [{ role: "user", content: "hi" }, { role: "tool", tool_call_id: "c1", content: [audio(idOf(ctx, "hello.wav"))] }]),
      };
    }, withMedia);
    const invalid = (element: string, words: string) => ({ status: 400, code: "invalid_argument", message: expect.stringContaining(words), details: { element, artifact_id: expect.stringMatching(/^art_/) } });
    expect(result).toEqual({
      ogg: invalid("messages[0].content[1]", "is audio/ogg; OpenAI-compatible chat completions take audio as wav or mp3 only"),
      pdfAsAudio: invalid("messages[0].content[0]", "is not audio (mime_type application/pdf)"),
      oggAsImage: invalid("messages[0].content[0]", "is not an image (mime_type audio/ogg)"),
      fileFromAssistant: invalid("messages[1].content[0]", "a file element is sent only in a user message"),
      audioInTool: invalid("messages[1].content[0]", "an audio element is sent only in a user message"),
    });
    const { result: blind } = await runner.run(host, "img-blind", async (api, ctx) => (await refusal(api, [{ role: "user", content: [{ type: "audio", artifact_id: idOf(ctx, "hello.wav") }] }])).status, withMedia);
    expect({ blind, sent: provider.calls.length - before }).toEqual({ blind: 403, sent: 0 });
  });

  it("is held once per element naming it, as an image is: an image and a file of one artifact over the budget are refused 413, the provider not called", async () => {
    // 120 KiB, 160 KiB as base64: one copy fits the budget, two do not.
    const big = Buffer.concat([PNG, Buffer.alloc(120 * 1024 - PNG.length, 7)]);
    const before = provider.calls.length;
    const { result } = await runner.run(host, "img-main", async (api, ctx) => {
      const id = imageOf(ctx, "image/png");
      const answer = await api("model.invoke", { model_id: "vision", messages: [{ role: "user", content: [{ type: "image", artifact_id: id }, { type: "file", artifact_id: id }] }] });
      return [answer.status, answer.body.error?.code];
    }, { input: { attachments: [{ content_base64: big.toString("base64"), name: "big.png", mime_type: "image/png" }] } });
    expect({ result, sent: provider.calls.length - before }).toEqual({ result: [413, "payload_too_large"], sent: 0 });
  });
});
