import { bodyLimit } from "hono/body-limit";
import { HostError } from "../lib/errors";

/** Refuse bodies over `maxSize` bytes with 413, before reading them whole. */
export function limitBody(maxSize: number) {
  return bodyLimit({
    maxSize,
    onError: () => {
      throw new HostError(413, "payload_too_large", `request body exceeds ${maxSize} bytes`);
    },
  });
}
