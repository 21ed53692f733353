/**
 * Whole numbers JSON parsing rounds, found in the text itself. A parsed value cannot tell a Python int such as
 * 2**70 or uuid.int (all digits, rounded to the nearest double) from a float that happens to be whole (1e+21):
 * the source text can. workerd gives a JSON.parse reviver each primitive's source text; a runtime that does not
 * (Node 20) finds nothing here, and the value-based check (unsafeIntegerIn) stays the only one.
 */

type SourceReviver = (this: unknown, key: string, value: unknown, context?: { source?: string }) => unknown;

const INTEGER_LITERAL = /^-?\d+$/;

/** Whether JSON.parse hands revivers the source text (checked once). */
const SOURCE_TEXT = (() => {
  let seen = false;
  JSON.parse("1", ((_key, value, context) => ((seen = context?.source === "1"), value)) as SourceReviver as never);
  return seen;
})();

/**
 * A whole number parsing rounds, by its value: beyond ±(2^53 − 1) but within 64 bits (an id). Larger magnitudes are
 * floating-point quantities (1e20), left alone but where the text shows them written as integers (roundedIntegerAt).
 */
export const isRoundedWhole = (n: number): boolean => Number.isInteger(n) && !Number.isSafeInteger(n) && Math.abs(n) <= 2 ** 64;

/**
 * The source text of the first number within the member at `path` of `text` (["params", "value"]) that `test` holds
 * for, or null: none there, or the runtime does not give the source text. "First" in numberIn's order, so a number
 * that a walk of the parsed value found is the one named here.
 */
function numberSourceAt(text: string, path: readonly string[], test: (value: number, source: string) => boolean): string | null {
  if (!SOURCE_TEXT) return null;
  const marks = new Map<unknown, Map<string, string>>();
  const reviver: SourceReviver = function (key, value, context) {
    if (typeof value === "number" && context?.source && test(value, context.source)) {
      let members = marks.get(this);
      if (!members) marks.set(this, (members = new Map()));
      members.set(key, context.source);
    }
    return value;
  };
  let holder: unknown = { "": JSON.parse(text, reviver as never) };
  let key = "";
  for (const step of path) {
    const next = (holder as Record<string, unknown>)[key];
    if (next === null || typeof next !== "object" || !Object.hasOwn(next, step)) return null;
    [holder, key] = [next, step];
  }
  const stack: [unknown, string][] = [[holder, key]];
  while (stack.length > 0) {
    const [h, k] = stack.pop()!;
    const source = marks.get(h)?.get(k);
    if (source) return source;
    const child = (h as Record<string, unknown>)[k];
    if (child !== null && typeof child === "object") for (const name of Object.keys(child)) stack.push([child, name]);
  }
  return null;
}

/**
 * The digits of the first integer literal beyond ±(2^53 − 1), as written in `text`, within the member at `path`
 * (["params", "value"]), or null: none there, or the runtime does not give the source text.
 */
export const roundedIntegerAt = (text: string, path: readonly string[]): string | null =>
  numberSourceAt(text, path, (value, source) => !Number.isSafeInteger(value) && INTEGER_LITERAL.test(source));

export const roundedIntegerMessage = (digits: string) => `the number ${digits} is beyond ±(2^53 − 1) and cannot be kept exactly; send it as a string`;

/** The `params` of a zod issue refusing a whole number by its parsed value, which `withDigitsAsSent` names as written. */
export const ROUNDED_INTEGER_ISSUE = { roundedInteger: true } as const;

type Issue = { path: readonly PropertyKey[]; message: string; params?: Record<string, unknown> };

/**
 * Issues of a value parsed from `text`, each refusing a rounded whole number (ROUNDED_INTEGER_ISSUE) naming it as
 * written at its path (under `base`, where the value sits in `text`): the parsed value is a neighbour of the number
 * sent (9007199254740992 for 9007199254740993, or for 9007199254740993.0), which the sender would look for in vain.
 * The number named is the one the value check refused (isRoundedWhole, in the same order), whatever its form.
 */
export function withDigitsAsSent<I extends Issue>(issues: readonly I[], text: string, base: readonly string[] = []): I[] {
  return issues.map((issue) => {
    if (issue.params?.roundedInteger !== true) return issue;
    const sent = numberSourceAt(text, [...base, ...issue.path.map(String)], isRoundedWhole);
    return sent ? { ...issue, message: roundedIntegerMessage(sent) } : issue;
  });
}

type RawJson = (text: string) => object;
/** JSON.rawJSON where the runtime has it (workerd does; Node 20 does not). */
const RAW_JSON = (JSON as { rawJSON?: RawJson }).rawJSON;
const isRaw = (JSON as { isRawJSON?: (v: unknown) => boolean }).isRawJSON;

/** A run of digits long enough to be past 2^53: without one, nothing can be rounded and the plain parse is taken. */
const LONG_DIGITS = /\d{16}/;

/** Whether `text` may hold a whole number JSON parsing rounds: without a run of 16 digits, none can be. */
export const mayHoldRoundedInteger = (text: string): boolean => LONG_DIGITS.test(text);

/**
 * The first number in a parsed JSON value that `test` holds for, or null. Iterative: the value's depth is the sender's.
 */
export function numberIn(value: unknown, test: (n: number) => boolean): number | null {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const current = stack.pop();
    if (typeof current === "number" && test(current)) return current;
    // One push per child: spreading a wide array (hundreds of thousands of members) into push() overflows the stack.
    if (current !== null && typeof current === "object") for (const child of Array.isArray(current) ? current : Object.values(current)) stack.push(child);
  }
  return null;
}

/**
 * Whether a parsed value holds a number past ±(2^53 − 1) (what a rounded whole number parses to): a walk of the
 * value, far cheaper than parsing its text again with a reviver, which digits inside strings (a phone number, a
 * hash) would otherwise cost every time.
 */
export const holdsUnsafeNumber = (value: unknown): boolean => numberIn(value, (n) => Number.isFinite(n) && Math.abs(n) > Number.MAX_SAFE_INTEGER) !== null;

/**
 * JSON.parse that keeps each whole number beyond ±(2^53 − 1) as written: a raw JSON value, which JSON.stringify
 * writes back digit for digit, so an upstream's answer (a tool's, a knowledge base's) passed on to a runner never has
 * an id rounded. The host cannot refuse such an answer as it refuses a runner's input: it is the upstream's to give.
 * A runtime without source text or rawJSON parses plainly.
 */
export function parseKeepingIntegers(text: string): unknown {
  if (!SOURCE_TEXT || !RAW_JSON || !LONG_DIGITS.test(text)) return JSON.parse(text);
  const keep: SourceReviver = (_key, value, context) =>
    typeof value === "number" && !Number.isSafeInteger(value) && context?.source && INTEGER_LITERAL.test(context.source) ? RAW_JSON(context.source) : value;
  return JSON.parse(text, keep as never);
}

/** The digits of a whole number `parseKeepingIntegers` kept as written, or undefined for any other value. */
export function keptIntegerText(value: unknown): string | undefined {
  return isRaw?.(value) ? (value as { rawJSON: string }).rawJSON : undefined;
}
