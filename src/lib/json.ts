/** Parse a JSON column written by the host; a corrupt value reads as the fallback. */
export function parseJson<T>(text: string | null | undefined, fallback: T): T {
  if (text == null) return fallback;
  try {
    return JSON.parse(text) as T;
  } catch {
    return fallback;
  }
}

export const iso = (ms: number | null | undefined): string | undefined => (ms == null ? undefined : new Date(ms).toISOString());

/** A platform's timestamp (ms) as ISO 8601, or undefined when it is no time a Date can hold: the receipt time stands in. */
export const platformTime = (ms: number): string | undefined => (Number.isFinite(ms) && Math.abs(ms) <= 8.64e15 ? new Date(ms).toISOString() : undefined);
