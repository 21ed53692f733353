/**
 * workerd's fetch rejects some failures with an opaque TypeError, "internal error; reference = …", the reason only
 * in the runtime's own log: a host name that does not resolve, and an answer it cannot parse as HTTP (a malformed
 * status line or header, headers over its 128 KiB limit). It cannot tell which to its caller, so neither can we;
 * saying its known causes spares an operator the guess ("Network connection lost." is refused or closed instead).
 */
const OPAQUE_FETCH_FAILURE = /^internal error; reference = (\S+)/;

/** What to say of a failed fetch that is workerd's opaque one (null for any other), its reference kept to match the runtime's log. */
export function opaqueFetchFailure(err: unknown): string | null {
  const reference = err instanceof Error ? OPAQUE_FETCH_FAILURE.exec(err.message)?.[1] : undefined;
  if (!reference) return null;
  return `the runtime's opaque internal error (its known causes: a host name that does not resolve, or an answer that is no readable HTTP, such as a malformed status line or header or headers over 128 KiB in all; runtime reference ${reference})`;
}
