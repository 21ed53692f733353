const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const TIME = String.raw`(\d{2}):(\d{2}):(\d{2})`;
const MONTH = "([a-z]{3})";

/** `Sun, 06 Nov 1994 08:49:37 GMT`: the form senders must use. */
const IMF_FIXDATE = new RegExp(String.raw`^[a-z]{3}, (\d{2}) ${MONTH} (\d{4}) ${TIME} GMT$`, "i");
/** `Sunday, 06-Nov-94 08:49:37 GMT`: obsolete (RFC 850), a two-digit year. */
const RFC850_DATE = new RegExp(String.raw`^[a-z]{6,9}, (\d{2})-${MONTH}-(\d{2}) ${TIME} GMT$`, "i");
/** `Sun Nov  6 08:49:37 1994`: obsolete (C's asctime), no zone named, GMT all the same. */
const ASCTIME_DATE = new RegExp(String.raw`^[a-z]{3} ${MONTH} ( \d|\d{2}) ${TIME} (\d{4})$`, "i");

/**
 * An HTTP-date (RFC 9110 §5.6.7) as milliseconds since the epoch, or undefined for anything else. Only its three
 * forms are read: `Date.parse` takes any text with a number in it for some day ("about 5", "wait 5" are May 2001),
 * which as a Retry-After is a date long past: a retry at once, where no wait was named at all.
 */
export function httpDateMs(value: string, now = Date.now()): number | undefined {
  let m = IMF_FIXDATE.exec(value);
  if (m) return utc(Number(m[3]), m[2], Number(m[1]), m.slice(4, 7));
  m = RFC850_DATE.exec(value);
  if (m) return ofTwoDigitYear(Number(m[3]), m[2], Number(m[1]), m.slice(4, 7), now);
  m = ASCTIME_DATE.exec(value);
  if (m) return utc(Number(m[6]), m[1], Number(m[2]), m.slice(3, 6));
  return undefined;
}

/**
 * A date of a two-digit year as RFC 9110 reads it: of this century, unless that instant is more than 50 years ahead
 * (judged by the instant, not the year alone: 31-Dec-76 is, on 24 Nov 2026), then of the century before (`99` is 1999).
 */
function ofTwoDigitYear(twoDigits: number, monthName: string, day: number, time: string[], now: number): number | undefined {
  const thisYear = new Date(now).getUTCFullYear();
  const year = thisYear - (thisYear % 100) + twoDigits;
  const fiftyYearsAhead = new Date(now);
  fiftyYearsAhead.setUTCFullYear(thisYear + 50);
  const at = utc(year, monthName, day, time);
  // A day that does not exist in the century it is read in (29-Feb-00 in 1900) is refused, as any other.
  return at !== undefined && at > fiftyYearsAhead.getTime() ? utc(year - 100, monthName, day, time) : at;
}

/** The instant, or undefined for a day or time that does not exist (`31 Feb`, `25:00:00`); a leap second is the next minute's first. */
function utc(year: number, monthName: string, day: number, time: string[]): number | undefined {
  const month = MONTHS.indexOf(monthName.toLowerCase());
  const [hour, minute, second] = time.map(Number);
  if (month < 0 || day < 1 || hour > 23 || minute > 59 || second > 60) return undefined;
  // setUTCFullYear, not Date.UTC, which reads the years 0 to 99 as 1900 to 1999.
  const at = new Date(0);
  at.setUTCFullYear(year, month, day);
  if (at.getUTCMonth() !== month) return undefined;
  at.setUTCHours(hour, minute, second);
  return at.getTime();
}
