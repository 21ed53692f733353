import { describe, expect, it } from "vitest";
import { retryAfterHeaderMs, secondsFieldMs } from "../../src/lib/retry-after";
import { httpDateMs } from "../../src/lib/http-date";

/**
 * A Retry-After header is delay-seconds or an HTTP-date (RFC 9110 §10.2.3); anything else names no wait (undefined),
 * so the caller backs off rather than retrying at once. The slack-post-rate-limited integration test drives it through a
 * platform's 429; these are the forms one by one.
 */
const NOW = Date.UTC(2026, 10, 24, 0, 0, 0);
const waitOf = (value: string) => retryAfterHeaderMs(new Headers({ "retry-after": value }), "retry-after", NOW);

describe("Retry-After", () => {
  it.each([
    ["5", 5_000],
    ["  5 ", 5_000],
    ["2.007", 2_007],
    ["0.0015", 2],
    ["0", 0],
  ])("delay-seconds %j is %d ms", (value, ms) => expect(waitOf(value)).toBe(ms));

  it.each(["5.", ".5", "1e3", "0x10", "+5", "-5", "Infinity", "NaN", "about 5", "wait 5", "Tue 5", "Dec 31", "Tue, 24 Nov 2026 00:00:05", "Tue, 24 Nov 2026 00:00:05 +0100", "Tue, 31 Feb 2026 00:00:05 GMT"])(
    "%j names no wait",
    (value) => expect(waitOf(value)).toBeUndefined(),
  );

  it.each([
    ["IMF-fixdate", "Tue, 24 Nov 2026 00:00:05 GMT"],
    ["RFC 850", "Tuesday, 24-Nov-26 00:00:05 GMT"],
    ["asctime (GMT, whatever the local zone)", "Tue Nov 24 00:00:05 2026"],
  ])("an HTTP-date in the %s form is the time until it", (_, value) => expect(waitOf(value)).toBe(5_000));

  it("asctime's day of one digit is padded with a space", () => expect(retryAfterHeaderMs(new Headers({ "retry-after": "Tue Dec  1 00:00:00 2026" }), "retry-after", NOW)).toBe(7 * 86_400_000));

  it("a date past is a wait of 0 (the time to retry has come)", () => expect(waitOf("Mon, 23 Nov 2026 00:00:00 GMT")).toBe(0));

  it("an RFC 850 year more than 50 years ahead is of the century before", () => {
    expect(waitOf("Thursday, 01-Jan-77 00:00:00 GMT")).toBe(0);
    expect(waitOf("Friday, 01-Jan-76 00:00:00 GMT")).toBe(Date.UTC(2076, 0, 1) - NOW);
  });

  it("an RFC 850 date is judged by its instant, not its year: 31-Dec-76 is more than 50 years after 24 Nov 2026", () => {
    // RFC 9110 §5.6.7: "a timestamp that appears to be more than 50 years in the future" is of the century before.
    expect(waitOf("Thursday, 31-Dec-76 00:00:00 GMT")).toBe(0);
    expect(waitOf("Tuesday, 24-Nov-76 00:00:00 GMT")).toBe(Date.UTC(2076, 10, 24) - NOW);
  });

  it("a number past any whole number of milliseconds stays a number (exactWaitMs leaves it out)", () => {
    expect(waitOf("9".repeat(400))).toBe(Number.POSITIVE_INFINITY);
    expect(waitOf("99999999999999999999")).toBe(1e23);
  });
});

describe("an HTTP-date's instant", () => {
  it("a four-digit year is that year, 0094 too (Date.UTC reads the years 0 to 99 as 1900 to 1999)", () => {
    const year94 = new Date(0);
    year94.setUTCFullYear(94, 10, 6);
    year94.setUTCHours(8, 49, 37);
    expect(httpDateMs("Sat, 06 Nov 0094 08:49:37 GMT")).toBe(year94.getTime());
    expect(httpDateMs("Sat Nov  6 08:49:37 0094")).toBe(year94.getTime());
  });
});

describe("a body's retry_after in seconds", () => {
  it.each([
    [0.1 + 0.2, 300],
    [2.007, 2_007],
    [-0, 0],
  ])("%d s is %d ms", (seconds, ms) => expect(secondsFieldMs(seconds)).toBe(ms));

  it.each([-5, Number.NaN, "5", null])("%j names no wait", (seconds) => expect(secondsFieldMs(seconds)).toBeUndefined());
});
