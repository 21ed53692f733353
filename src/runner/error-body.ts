import { escapedHead } from "../lib/log-text";
import { quotedAsSent, type QuoteScrub } from "../run/sent-secrets";

/** Bytes of a refusing runner's body read at most: the start of a reason or a traceback, never its whole stream. */
export const ERROR_BODY_MAX_BYTES = 512;
/** How long the host waits for them: a body that stalls costs the run's end no more than this. */
export const ERROR_BODY_MAX_MS = 500;
/** Characters of it the run's error quotes, counted as escaped (a control character is six: `\u0001`), whatever the body holds. */
export const ERROR_BODY_SHOWN_CHARS = 300;

/**
 * The start of a non-2xx answer's body, as the run's error quotes it (the runner's own reason: "invalid signature",
 * a traceback), or "" when none came in time. Bounded in bytes and time, and ended early by `signal` (a cancel, the
 * deadline); the body is cancelled after, read or not. `scrub` takes out what the runner was sent that is not to be
 * quoted (its run's secrets, echoed by a framework's refusal). Never throws.
 */
export async function errorBodyStart(res: Response, signal: AbortSignal, scrub: QuoteScrub = quotedAsSent): Promise<string> {
  const body = res.body;
  if (!body) return "";
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let seen = 0;
  let ended = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onAbort = () => {};
  const stop = new Promise<"stop">((resolve) => {
    timer = setTimeout(resolve, ERROR_BODY_MAX_MS, "stop");
    onAbort = () => resolve("stop");
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    // One byte past the cap tells the reason was cut.
    while (seen <= ERROR_BODY_MAX_BYTES) {
      const read = await Promise.race([reader.read(), stop]);
      if (read === "stop") break;
      if (read.done) {
        ended = true;
        break;
      }
      const room = ERROR_BODY_MAX_BYTES - seen;
      seen += read.value.length;
      // Streamed: a character the cap cuts in half is left out, not shown as U+FFFD.
      if (room > 0) text += decoder.decode(read.value.subarray(0, room), { stream: true });
    }
  } catch {
    // The runner went away mid-body: what came is shown.
  } finally {
    clearTimeout(timer);
    signal.removeEventListener("abort", onAbort);
    // Settles a read still pending, and frees the connection.
    void reader.cancel().catch(() => {});
  }
  // Scrubbed before it is cut to be shown; read only in part, its last characters may be a secret's start.
  const shown = escapedHead(scrub(text, { tail: !ended }).trim(), ERROR_BODY_SHOWN_CHARS);
  const cut = seen > ERROR_BODY_MAX_BYTES || shown.cut;
  return shown.text ? `${shown.text}${cut ? "…" : ""}` : "";
}
