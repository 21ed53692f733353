/**
 * workerd's fetch rejects some failures with an opaque TypeError, "internal error; reference = …", the reason only
 * in the runtime's own log: a host name that does not resolve, and an answer it cannot parse as HTTP (a malformed
 * status line or header, headers over its 128 KiB limit, a body whose chunked framing is broken). It cannot tell
 * which to its caller, so neither can we; saying its known causes spares an operator the guess ("Network connection
 * lost." is refused or closed instead). Reading such an answer's body may fail the same way.
 */
const OPAQUE_FETCH_FAILURE = /^internal error; reference = (\S+)/;

/**
 * What to say of a failed fetch that is workerd's opaque one (null for any other), its reference kept to match the
 * runtime's log. The reference comes first: a log line cuts another party's words at LOGGED_TEXT_CHARS (300), and
 * after a call site's own words the causes alone would take the rest.
 */
export function opaqueFetchFailure(err: unknown): string | null {
  const reference = err instanceof Error ? OPAQUE_FETCH_FAILURE.exec(err.message)?.[1] : undefined;
  if (!reference) return null;
  return `the runtime's opaque internal error (runtime reference ${reference}; its known causes: a host name that does not resolve, or an answer that is no readable HTTP, such as a malformed status line or header or headers over 128 KiB in all, or a body whose chunked framing is broken)`;
}

/** Why a fetch (or the reading of its answer) failed: the opaque error's known causes, or any other error's own message. */
export function fetchFailureReason(err: unknown): string {
  return opaqueFetchFailure(err) ?? (err instanceof Error ? err.message : String(err));
}

/** `said`, what a call site says of any failure that is not the opaque one, with the opaque one's known causes after it. */
export function withOpaqueCauses(said: string, err: unknown): string {
  const opaque = opaqueFetchFailure(err);
  return opaque === null ? said : `${said}: ${opaque}`;
}

/** workerd's opaque fetch failure, its message saying the known causes; the runtime's own error is its cause. */
export class OpaqueFetchError extends Error {
  override readonly name = "OpaqueFetchError";
}

/**
 * A fetch's rejection as code that passes its message on sees it (the MCP SDK): the opaque one as an OpaqueFetchError,
 * any other as it was (an abort's reason stays the reason, so the caller still tells a deadline from a failure).
 */
export function namingOpaqueFailure(err: unknown): unknown {
  const opaque = opaqueFetchFailure(err);
  return opaque === null ? err : new OpaqueFetchError(opaque, { cause: err });
}

/**
 * What to say of a failure that workerd's opaque one caused, through a client library's own errors (libSQL's: its
 * fetch is ours, its rejection named by namingOpaqueFailure, or not); null for any other.
 */
export function opaqueFetchFailureBehind(err: unknown): string | null {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e instanceof OpaqueFetchError) return e.message;
    const said = opaqueFetchFailure(e);
    if (said !== null) return said;
  }
  return null;
}
