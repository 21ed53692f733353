import { RunnerCallError } from "./errors";
import { isTransientStatus } from "../lib/http-status";
import { readLines, SSE_FIELD_BYTES, sseFramer, type LineLimits } from "./lines";
import { errorBodyStart } from "./error-body";
import { signRunRequest } from "./signing";
import { joinUrl } from "../lib/url";
import { headOf } from "../lib/text";
import { fetchFailureReason } from "../lib/opaque-fetch-failure";
import { quotedAsSent, type QuoteScrub } from "../run/sent-secrets";

/** Content codings fetch decodes before the body is read. */
const DECODED_ENCODINGS = new Set(["gzip", "x-gzip", "br", "identity"]);

export interface RunnerTarget {
  baseUrl: string;
  runnerName: string;
  secret?: string | null;
}

export interface RunnerCallOptions extends LineLimits {
  runId: string;
  /** Aborting ends the call; a RunnerCallError reason (deadline, cancel) is rethrown as is. */
  signal: AbortSignal;
  /** What a refusal's quoted body leaves out: the secrets the request carried (../run/sent-secrets.ts). */
  scrub?: QuoteScrub;
}

/** Whether the body arrives as it was meant to be read: the runtime decodes gzip and br, any other coding is left as sent. */
function encodingDecoded(res: Response): boolean {
  const encoding = res.headers.get("content-encoding")?.trim().toLowerCase();
  return !encoding || DECODED_ENCODINGS.has(encoding);
}

function abortReason(signal: AbortSignal, fallback: unknown): unknown {
  return signal.aborted && signal.reason instanceof RunnerCallError ? signal.reason : fallback;
}

/**
 * POSTs the run request (§3) and yields the result payload strings of each
 * network chunk as they arrive. Throws RunnerCallError for transport and
 * framing failures; result semantics are the caller's.
 */
async function* run(target: RunnerTarget, body: string, opts: RunnerCallOptions): AsyncGenerator<string[]> {
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: "application/x-ndjson",
    "x-agent-run-id": opts.runId,
  };
  if (target.secret) {
    const timestamp = Math.floor(Date.now() / 1000);
    headers["x-agent-timestamp"] = String(timestamp);
    headers["x-agent-signature"] = await signRunRequest(target.secret, timestamp, body);
  }
  const url = joinUrl(target.baseUrl, `/runners/${encodeURIComponent(target.runnerName)}/run`);
  let res: Response;
  try {
    // A redirect is an answer like any other non-2xx (§3): the signed request and its run token go nowhere else.
    res = await fetch(url, { method: "POST", headers, body, signal: opts.signal, redirect: "manual" });
  } catch (err) {
    // workerd's opaque error gets its known causes named, not only its reference (an operator cannot read its log on Cloudflare).
    const failure = new RunnerCallError("runner.unreachable", `runner request failed: ${fetchFailureReason(err)}`, { cause: err, retryable: true });
    throw abortReason(opts.signal, failure);
  }
  if (!res.ok) {
    const redirected = res.status >= 300 && res.status < 400 ? " (a redirect, which the host does not follow)" : "";
    // The runner's own reason (a bad signature, a traceback) for whoever reads the run; a body in a coding fetch leaves
    // encoded would read as noise. Not logged: logRunEnd leaves a runner's words out.
    let reason = "";
    if (encodingDecoded(res)) reason = await errorBodyStart(res, opts.signal, opts.scrub);
    else await res.body?.cancel().catch(() => {});
    throw abortReason(opts.signal, new RunnerCallError("runner.http_error", `runner answered HTTP ${res.status}${redirected}${reason ? `: ${reason}` : ""}`, { retryable: isTransientStatus(res.status) }));
  }
  // A 2xx without a body (204) is no HTTP error (§3): it closed without a terminal result.
  if (!res.body) throw new RunnerCallError("runner.stream_closed", `runner answered HTTP ${res.status} with no result stream`);
  // The runtime decodes gzip and br; any other coding arrives as it was sent, which no line of it could be read from.
  if (!encodingDecoded(res)) {
    await res.body.cancel().catch(() => {});
    // The runner's word too: it may hold what the request carried (scrubbed as sent, before any cut or case change).
    const encoding = (opts.scrub ?? quotedAsSent)(res.headers.get("content-encoding")?.trim() ?? "").toLowerCase();
    throw new RunnerCallError("runner.protocol_error", `runner answered with Content-Encoding ${headOf(encoding, 40)}, which the host does not decode: send the stream uncompressed, gzip or br`);
  }
  const frame = /text\/event-stream/i.test(res.headers.get("content-type") ?? "") ? sseFramer(opts) : null;
  try {
    for await (const lines of readLines(res.body, opts, frame ? { anyLineEnding: true, fieldBytes: SSE_FIELD_BYTES } : {})) {
      const { payloads, error } = frame ? frame(lines) : { payloads: lines };
      const results = payloads.filter((l) => l.trim() !== "");
      if (results.length) yield results;
      if (error) throw error;
    }
    // A clean end closes the frame in progress, as it ends an NDJSON line sent without its newline: a runner whose last
    // frame (its run.completed) lacks the blank line after it still ends its run as it said.
    const rest = frame?.end().filter((l) => l.trim() !== "") ?? [];
    if (rest.length) yield rest;
  } catch (err) {
    throw abortReason(
      opts.signal,
      err instanceof RunnerCallError ? err : new RunnerCallError("runner.stream_closed", `result stream broke: ${fetchFailureReason(err)}`, { cause: err }),
    );
  } finally {
    // Stop the body if the consumer left early (protocol error, abort).
    await res.body.cancel().catch(() => {});
  }
}

export const runnerClient = { run };
