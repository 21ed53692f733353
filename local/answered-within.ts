/** A call into workerd (an R2 inspection through Miniflare's proxy) that got no answer in time. */
export class NoAnswerError extends Error {
  override readonly name = "NoAnswerError";
  constructor(
    readonly what: string,
    readonly ms: number,
    /** The call, still waiting: should workerd answer after all, its caller may await it before stopping workerd. */
    readonly pending: Promise<unknown>,
  ) {
    super(`${what}: workerd did not answer in ${ms} ms (its event loop busy or stuck: a call now would not be answered either)`);
  }
}

/** `call`'s outcome, or a NoAnswerError once `ms` have passed without one. */
export async function answeredWithin<T>(call: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const pending = call.catch(() => undefined);
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new NoAnswerError(what, ms, pending)), ms)));
  try {
    return await Promise.race([call, late]);
  } finally {
    clearTimeout(timer);
  }
}
