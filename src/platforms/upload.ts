/**
 * Request bodies that carry an answer's file, streamed from R2 to the
 * platform with a Content-Length: a file of any size costs a few chunks of
 * memory, not its size, in an isolate other conversations share. Each body
 * is made fresh, so a retried or redirected call streams the file again.
 */
import { randomHex } from "../lib/crypto";
import type { OutgoingFile } from "./types";

const encoder = new TextEncoder();

/** Bytes known up front, or a stream opened when the body is read that far. */
type Part = Uint8Array | (() => Promise<ReadableStream<Uint8Array>>);

/** The file of a body could not be read from storage: the platform is not at fault, and `final` says a retry cannot help. */
export class FileReadError extends Error {
  override readonly name = "FileReadError";
  constructor(
    message: string,
    readonly final: boolean,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** Why a body made here failed on the storage side, if it did: known to the call that sent it once its fetch fails. */
const sourceFailures = new WeakMap<object, { error?: FileReadError }>();
export const sourceFailureOf = (body: unknown): FileReadError | undefined => (body && typeof body === "object" ? sourceFailures.get(body)?.error : undefined);

/** The parts one after another, as a body of exactly `length` bytes (workerd sends it with that Content-Length). */
function concatenated(parts: Part[], length: number): ReadableStream<Uint8Array> {
  const { readable, writable } = new FixedLengthStream(length);
  const writer = writable.getWriter();
  const state: { error?: FileReadError } = {};
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  void (async () => {
    for (const part of parts) {
      if (part instanceof Uint8Array) {
        await writer.write(part);
        continue;
      }
      const stream = await part().catch((err: Error) => {
        throw new FileReadError(err.message, true, { cause: err });
      });
      reader = stream.getReader();
      for (;;) {
        const chunk = await reader.read().catch((err: Error) => {
          throw new FileReadError(`the file could not be read: ${err.message}`, false, { cause: err });
        });
        if (chunk.done) break;
        await writer.write(chunk.value);
      }
      reader = undefined;
    }
    await writer.close();
  })().catch((err: unknown) => {
    if (err instanceof FileReadError) state.error = err;
    // Whoever broke off (the platform, a timeout, storage), the stored object's stream is released.
    reader?.cancel(err).catch(() => undefined);
    return writer.abort(err).catch(() => undefined);
  });
  sourceFailures.set(readable, state);
  return readable;
}

/** A file alone as a body (a presigned upload URL takes the raw bytes). */
export const fileBody = (file: OutgoingFile): ReadableStream<Uint8Array> => concatenated([() => file.open()], file.size);

/** Quoted-string content of a Content-Disposition parameter, escaped as browsers do it for a form. */
const dispositionValue = (s: string) => s.replace(/"/g, "%22").replace(/\r/g, "%0D").replace(/\n/g, "%0A");

/** A multipart/form-data upload: text fields, then one file field streamed from storage. */
export class UploadForm {
  constructor(
    private readonly fields: Record<string, string>,
    private readonly fileField: string,
    readonly file: OutgoingFile,
  ) {}

  /** A fresh body and its content type; the boundary is random, so no file's bytes can end the form early by chance. */
  body(): { body: ReadableStream<Uint8Array>; contentType: string } {
    const boundary = `agent-host-${randomHex(16)}`;
    let head = "";
    for (const [name, value] of Object.entries(this.fields)) head += `--${boundary}\r\nContent-Disposition: form-data; name="${dispositionValue(name)}"\r\n\r\n${value}\r\n`;
    const mimeType = this.file.mimeType.replace(/[\r\n]/g, "");
    head += `--${boundary}\r\nContent-Disposition: form-data; name="${dispositionValue(this.fileField)}"; filename="${dispositionValue(this.file.name)}"\r\nContent-Type: ${mimeType}\r\n\r\n`;
    const prefix = encoder.encode(head);
    const suffix = encoder.encode(`\r\n--${boundary}--\r\n`);
    return { body: concatenated([prefix, () => this.file.open(), suffix], prefix.length + this.file.size + suffix.length), contentType: `multipart/form-data; boundary=${boundary}` };
  }
}

/**
 * A call that uploads a file gets its size's worth of time on top of the usual timeout, at
 * 1 MB/s: a 50 MB document is not cut off at a timeout sized for a text message.
 */
export const uploadTimeoutMs = (timeoutMs: number, file: OutgoingFile) => timeoutMs + Math.ceil(file.size / 1_000);

/** A media type's essence (`type/subtype`), as RFC 6838 compares them: case-insensitive, parameters left out. */
export const mediaEssence = (mimeType: string): string => mimeType.split(";")[0].trim().toLowerCase();
