import { headOf } from "./text";

/** The content codings that change a body's bytes (RFC 9110 and IANA's registry): one sent so is not read. */
const COMPRESSING = new Set(["gzip", "x-gzip", "deflate", "br", "zstd", "compress", "x-compress", "dcb", "dcz", "exi", "pack200-gzip", "aes128gcm"]);

/**
 * Why a body is not read, when its `Content-Encoding` compresses it; null when it is read as sent. The host reads
 * bodies as sent: a compressed one would be refused as not UTF-8, not JSON or badly signed, or stored as the wrong
 * bytes, and the caller would look for the fault elsewhere. A coding that compresses nothing (a mislabel some senders
 * use, `utf-8`) leaves the body readable.
 */
export function compressedBodyRefusal(headers: Headers): string | null {
  const encoding = headers.get("content-encoding")?.trim().toLowerCase();
  if (!encoding || !encoding.split(",").some((coding) => COMPRESSING.has(coding.trim()))) return null;
  return `a body in Content-Encoding ${headOf(encoding, 40)} is not read: send it uncompressed`;
}
