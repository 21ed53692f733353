import * as z from "zod";

/** Model and knowledge base ids: opaque to runners, chosen by the operator or generated. */
export const ResourceIdSchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/, "1-128 characters: letters, digits, _ . : -");

/**
 * HTTP tool and MCP server names: no dots, so an MCP tool's full name
 * `{server}.{tool}` splits unambiguously at its first dot.
 */
export const ToolNameSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "1-64 characters: letters, digits, _ -");

/**
 * Outbound endpoints the operator configures (a resource's, a runner service's, a bot's API origin). Without
 * `user:password@`: the Workers runtime's fetch sends no such credentials, so the call would go out without them;
 * credentials go in a header, an API key or a secret.
 */
export const EndpointSchema = z.url({ protocol: /^https?$/ }).refine((url) => {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    // zod runs this check even when the value failed z.url(): one that is no URL at all is already refused there.
    return true;
  }
  return !parsed.username && !parsed.password;
}, "credentials in the URL (user:password@) are not sent by the runtime; give them as a header, api_key or secret");

/**
 * A credential sent in a header (a header value, an `Authorization: Bearer`
 * key): a line break would end the header (RFC 9110 forbids CR, LF and NUL in
 * a field value), so it is refused when registered, not at each call, where
 * it would look like the provider failing.
 */
export const headerValue = (maxLength: number) => z.string().max(maxLength).regex(/^[^\r\n\0]*$/, "cannot hold a line break or NUL: it is sent in an HTTP header");

/** Extra request headers (often credentials): stored as secrets. */
export const HeadersSchema = z.record(z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, "not a valid header name"), headerValue(8192));
