import { listenLoopback, readBody, sendJson, sendPartThenStall } from "./http-server";

/**
 * A fake retrieval endpoint on loopback: `{query, top_k}` in, `{entries}` out.
 * It returns more entries than asked (unordered), so the host's cap shows,
 * never answers the query "hang", answers "echo" with the credential it
 * received (a careless endpoint), starts its answer to "stall" and never ends
 * it, and trickles its answer to "trickle" a byte every 50 ms. `opts.apiKey` is
 * read at each request: a test may revoke a key by changing it.
 */
export async function startFakeRetrieval(opts: { apiKey: string | string[] }) {
  const accepted = { has: (authorization: string) => [opts.apiKey].flat().some((key) => authorization === `Bearer ${key}`) };
  const calls: { authorization: string | undefined; body: any }[] = [];
  const server = await listenLoopback(async (req, res) => {
    const body = JSON.parse((await readBody(req)) || "{}");
    calls.push({ authorization: req.headers.authorization, body });
    if (!accepted.has(req.headers.authorization ?? "")) return sendJson(res, 401, { error: "bad key" });
    if (body.query === "hang") return;
    const answer = JSON.stringify({ entries: [{ content: `${body.query} passage`, score: 1 }] });
    if (body.query === "stall") return sendPartThenStall(res, "application/json", answer.slice(0, 10));
    if (body.query === "trickle") return sendPartThenStall(res, "application/json", "", { rest: `${" ".repeat(400)}${answer}`, trickleMs: 50 });
    if (body.query === "echo") return sendJson(res, 200, { entries: [{ content: `you sent ${req.headers.authorization}`, score: 1, metadata: { auth: req.headers.authorization } }] });
    const entries = Array.from({ length: 30 }, (_, i) => ({ content: `${body.query} passage ${i}`, score: ((i * 7) % 30) / 30, metadata: { doc: `d${i}` } }));
    return sendJson(res, 200, { entries });
  });
  return { url: server.url, calls, close: server.close };
}
