import { deferred } from "./host-api";
import { listenLoopback, readBody, sendJson, sendPartThenStall } from "./http-server";

export interface ProviderCall {
  path: string;
  authorization: string | undefined;
  body: any;
}

/** The user text that makes a streamed answer pause mid-way until `releaseStream()`. */
export const HOLD_STREAM = "hold the stream";
/** Streamed answers that end badly (or oddly), chosen by the user text. */
export const STREAM_CLOSES_EARLY = "close the stream early";
export const STREAM_ERROR_CHUNK = "send an error chunk";
export const STREAM_NO_DONE = "finish without done";
/** A streamed answer that never ends: a delta every 20 ms until the host closes the connection (counted in `state.streamsAbandoned`). */
export const STREAM_ENDLESS = "stream forever";
/** A streamed answer that sends its first deltas, then nothing until the host lets go (counted in `state.streamsAbandoned`). */
export const STREAM_STALLS = "stall mid-stream";
/** A user text the provider answers by quoting the Authorization header it received, as a careless proxy might. */
export const ECHO_KEY = "what key did I use?";

/**
 * A fake OpenAI-compatible provider on loopback: `/v1/chat/completions`
 * (JSON and SSE) and `/v1/rerank`. Each provider model name has its own API
 * key; a wrong key is a 401 and a model listed in `failing` a 503, both
 * echoing the key they received, as careless providers do. Other models
 * misbehave as their option says (`hanging`, `silentStreams`, `jsonStreams`,
 * `stallingBodies`), and some user texts end a stream badly (STREAM_CLOSES_EARLY,
 * STREAM_ERROR_CHUNK, STREAM_STALLS) or without [DONE] (STREAM_NO_DONE).
 */
export async function startFakeProvider(opts: {
  keys: Record<string, string>;
  failing?: string[];
  /** Models whose requests are accepted and never answered, not even with headers. */
  hanging?: string[];
  /** Models whose streams answer 200 with SSE headers and then never send a byte. */
  silentStreams?: string[];
  /** Models that answer a stream request with a plain JSON completion (200, application/json). */
  jsonStreams?: string[];
  /** Models whose JSON answers (completions, rerank) send headers and the start of the body, then nothing. */
  stallingBodies?: string[];
}) {
  const calls: ProviderCall[] = [];
  const failing = new Set(opts.failing ?? []);
  const hanging = new Set(opts.hanging ?? []);
  const silentStreams = new Set(opts.silentStreams ?? []);
  const jsonStreams = new Set(opts.jsonStreams ?? []);
  const stallingBodies = new Set(opts.stallingBodies ?? []);
  let gate = deferred();
  const state = { streamsFinished: 0, streamsAbandoned: 0 };

  const server = await listenLoopback(async (req, res) => {
    const body = JSON.parse((await readBody(req)) || "{}");
    const authorization = req.headers.authorization;
    calls.push({ path: req.url ?? "", authorization, body });
    const key = opts.keys[body.model];
    if (!key || authorization !== `Bearer ${key}`) return sendJson(res, 401, { error: { message: `Incorrect API key provided: ${authorization}` } });
    if (failing.has(body.model)) return sendJson(res, 503, { error: { message: `model overloaded (request authorised by ${authorization})` } });
    if (hanging.has(body.model)) return; // accepted, never answered
    if (stallingBodies.has(body.model) && !body.stream) return sendPartThenStall(res, "application/json", '{"choices": [');

    if (req.url === "/v1/rerank") {
      const results = (body.documents as string[])
        .map((doc, index) => ({ index, relevance_score: doc.includes(body.query) ? 0.9 : index / 4 }))
        .sort((a, b) => b.relevance_score - a.relevance_score)
        .slice(0, body.top_n);
      return sendJson(res, 200, { results, usage: { total_tokens: 42 } });
    }
    if (req.url !== "/v1/chat/completions") return sendJson(res, 404, { error: { message: "no such route" } });

    const lastUser = [...body.messages].reverse().find((m: any) => m.role === "user");
    const text = typeof lastUser?.content === "string" ? lastUser.content : JSON.stringify(lastUser?.content);
    if (!body.stream || jsonStreams.has(body.model)) {
      if (body.tools?.length) {
        const call = { id: "call_1", type: "function", function: { name: body.tools[0].function.name, arguments: '{"city":"Oslo"}' } };
        return sendJson(res, 200, { choices: [{ message: { role: "assistant", content: null, tool_calls: [call] }, finish_reason: "tool_calls" }], usage: { prompt_tokens: 20, completion_tokens: 5, total_tokens: 25 } });
      }
      return sendJson(res, 200, {
        model: body.model,
        choices: [{ index: 0, message: { role: "assistant", content: text === ECHO_KEY ? `you used ${authorization}` : `${body.model} says: ${text}` }, finish_reason: "stop" }],
        usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 },
      });
    }

    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    if (silentStreams.has(body.model)) return void res.flushHeaders(); // headers, then silence
    const send = (chunk: unknown) => res.write(`data: ${JSON.stringify(chunk)}\n\n`);
    const delta = (d: Record<string, unknown>, finish: string | null = null) => send({ choices: [{ index: 0, delta: d, finish_reason: finish }] });
    res.write(": keep-alive\n\n");
    delta({ role: "assistant", content: "" });
    delta({ content: "Hel" });
    delta({ content: "lo" });
    if (text === STREAM_CLOSES_EARLY) return void res.end(); // no finish_reason, no [DONE]
    if (text === STREAM_STALLS) return void res.on("close", () => void (res.writableFinished || state.streamsAbandoned++));
    if (text === STREAM_ENDLESS) {
      const ticker = setInterval(() => delta({ content: "." }), 20);
      // Bounded, so a host that never lets go cannot keep the test process alive.
      const limit = setTimeout(() => res.end(), 30_000);
      res.on("close", () => {
        clearInterval(ticker);
        clearTimeout(limit);
        if (!res.writableFinished) state.streamsAbandoned++;
      });
      return;
    }
    if (text === STREAM_ERROR_CHUNK) {
      send({ error: { message: `upstream overloaded (key ${authorization})`, type: "server_error", code: 529 } });
      return void res.end();
    }
    // Held until the test releases it; a host that buffered the stream would never let the runner do so (the timer ends the wait).
    if (text === HOLD_STREAM) await Promise.race([gate.promise, new Promise((r) => setTimeout(r, 5_000))]);
    if (text === ECHO_KEY) delta({ content: ` (you used ${authorization})` });
    delta({ content: ` from ${body.model}` });
    delta({}, "stop");
    send({ choices: [], usage: { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 } });
    res.end(text === STREAM_NO_DONE ? undefined : "data: [DONE]\n\n");
    state.streamsFinished++;
  });

  return {
    baseUrl: `${server.url}/v1`,
    calls,
    state,
    /** Let a held stream finish. */
    releaseStream() {
      gate.resolve();
      gate = deferred();
    },
    close: () => {
      gate.resolve();
      return server.close();
    },
  };
}
