/**
 * An HTTP status that says "not now" rather than "not this": the server failing or overloaded (5xx), throttling (429)
 * or timing out the request (408). Sent again later, the same request may well succeed.
 */
export const isTransientStatus = (status: number): boolean => status >= 500 || status === 429 || status === 408;
