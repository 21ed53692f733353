/**
 * The ARTIFACTS bucket with every call bounded, as every database round trip is (DB_QUERY_TIMEOUT_MS): R2 that hangs
 * fails the one call (a BlobStoreTimeout) instead of holding a run's end, the conversation's next run, an ingress
 * answer or a sweep. One timer per call (a body read whole too); a body streamed to or from R2 is bounded by its
 * progress (./bounded-streams.ts). A call R2 fails itself throws a BlobStoreFailed (./blob-fault.ts), so callers
 * tell storage's trouble from their own by one type, however R2 let them down.
 */
import { asStorageFault } from "./blob-fault";
import { answeredWithin, BlobStoreTimeout } from "./blob-timeout";
import { boundedRead, PutProgress, type BodyTap } from "./bounded-streams";

/**
 * What a call made when its deadline has (nearly) passed still gets: about what a healthy R2 call takes at worst, so
 * a best-effort delete after a slow step is still made, while one that hangs costs the caller little more.
 */
const DEADLINE_FLOOR_MS = 200;

type PutValue = ReadableStream | ArrayBuffer | ArrayBufferView | string | null | Blob;

const bounded = <T>(op: string, target: string, ms: number, work: Promise<T>) =>
  answeredWithin(
    work.catch((err: unknown) => Promise.reject(asStorageFault(op, target, err))),
    ms,
    () => new BlobStoreTimeout(op, target, ms),
  );

export class BoundedBucket implements R2Bucket {
  constructor(
    private readonly inner: R2Bucket,
    private readonly timeoutMs: number,
    private readonly deadlineAt?: number,
  ) {}

  /** This bucket, its calls also ending by `deadlineAt` (ms since the epoch: a platform waiting for its answer), each given at least DEADLINE_FLOOR_MS. */
  by(deadlineAt: number | undefined): BoundedBucket {
    return deadlineAt === undefined ? this : new BoundedBucket(this.inner, this.timeoutMs, deadlineAt);
  }

  /** What one call made now may wait. */
  private boundMs(): number {
    return this.deadlineAt === undefined ? this.timeoutMs : Math.min(this.timeoutMs, Math.max(DEADLINE_FLOOR_MS, this.deadlineAt - Date.now()));
  }

  head(key: string): Promise<R2Object | null> {
    return bounded("head", key, this.boundMs(), this.inner.head(key));
  }

  get(key: string, options: R2GetOptions & { onlyIf: R2Conditional | Headers }): Promise<R2ObjectBody | R2Object | null>;
  get(key: string, options?: R2GetOptions): Promise<R2ObjectBody | null>;
  async get(key: string, options?: R2GetOptions): Promise<R2ObjectBody | R2Object | null> {
    const ms = this.boundMs();
    const object = await bounded("get", key, ms, this.inner.get(key, options));
    return object && "body" in object ? new BoundedObjectBody(object, ms) : object;
  }

  put(key: string, value: PutValue, options?: R2PutOptions & { onlyIf: R2Conditional | Headers }): Promise<R2Object | null>;
  put(key: string, value: PutValue, options?: R2PutOptions): Promise<R2Object>;
  put(key: string, value: PutValue, options?: R2PutOptions): Promise<R2Object | null> {
    // A stream here has its length fixed already, so its progress cannot be watched: a body that arrives over time goes through putStream.
    return bounded("put", key, this.boundMs(), this.inner.put(key, value, options));
  }

  /**
   * A body of `length` bytes that arrives over time (an upload), bounded by its progress: R2 must take each chunk it
   * is offered, and answer once the body has ended, within the bound; the sender's pace is not counted. `tap` sees
   * each chunk on its way (in the same pass: no stream of its own).
   */
  putStream(key: string, body: ReadableStream<Uint8Array>, length: number, options?: R2PutOptions, tap?: BodyTap): Promise<R2Object> {
    const ms = this.boundMs();
    const progress = new PutProgress(ms, () => new BlobStoreTimeout("put", key, ms));
    const put = progress.bound(this.inner.put(key, progress.watch(body, tap).pipeThrough(new FixedLengthStream(length)), options));
    return put.catch(async (err: unknown) => {
      // A put that failed as its sender broke off (or its tap, or the run's deadline) is the body's failure, not R2's.
      if (progress.bodyFailed) throw err;
      // R2's: its sender may still be sending, and is heard out (bounded) so that it reads the answer, not a reset.
      const fault = asStorageFault("put", key, err);
      await progress.drainRest(fault, length);
      throw fault;
    });
  }

  delete(keys: string | string[]): Promise<void> {
    const target = typeof keys === "string" ? keys : keys.length === 1 ? keys[0] : `${keys.length} keys`;
    return bounded("delete", target, this.boundMs(), this.inner.delete(keys));
  }

  list(options?: R2ListOptions): Promise<R2Objects> {
    return bounded("list", options?.prefix ? `${options.prefix}*` : "the bucket", this.boundMs(), this.inner.list(options));
  }

  async createMultipartUpload(key: string, options?: R2MultipartOptions): Promise<R2MultipartUpload> {
    return new BoundedUpload(await bounded("multipart upload", key, this.boundMs(), this.inner.createMultipartUpload(key, options)), () => this.boundMs());
  }

  resumeMultipartUpload(key: string, uploadId: string): R2MultipartUpload {
    return new BoundedUpload(this.inner.resumeMultipartUpload(key, uploadId), () => this.boundMs());
  }
}

/** A multipart upload's calls, each bounded: its parts are bytes in memory (at most 5 MiB: artifacts/upload.ts). */
class BoundedUpload implements R2MultipartUpload {
  constructor(
    private readonly inner: R2MultipartUpload,
    private readonly boundMs: () => number,
  ) {}

  get key(): string {
    return this.inner.key;
  }

  get uploadId(): string {
    return this.inner.uploadId;
  }

  uploadPart(partNumber: number, value: ReadableStream | ArrayBuffer | ArrayBufferView | string | Blob, options?: R2UploadPartOptions): Promise<R2UploadedPart> {
    return bounded(`upload of part ${partNumber}`, this.key, this.boundMs(), this.inner.uploadPart(partNumber, value, options));
  }

  abort(): Promise<void> {
    return bounded("multipart abort", this.key, this.boundMs(), this.inner.abort());
  }

  complete(uploadedParts: R2UploadedPart[]): Promise<R2Object> {
    return bounded("multipart complete", this.key, this.boundMs(), this.inner.complete(uploadedParts));
  }
}

/**
 * An object read from R2, its body bounded too: streamed (`body`: a file sent to a chat), each chunk within the bound,
 * so a read that stalls fails and a long one does not; read whole at once (`arrayBuffer()`, `text()`...: a window of
 * artifact.read, a model's input, a payload, at most a few MiB), within the bound in all.
 */
class BoundedObjectBody implements R2ObjectBody {
  readonly key: string;
  readonly version: string;
  readonly size: number;
  readonly etag: string;
  readonly httpEtag: string;
  readonly checksums: R2Checksums;
  readonly uploaded: Date;
  readonly httpMetadata?: R2HTTPMetadata;
  readonly customMetadata?: Record<string, string>;
  readonly range?: R2Range;
  readonly storageClass: string;
  readonly ssecKeyMd5?: string;
  private stream: ReadableStream<Uint8Array> | undefined;

  constructor(
    private readonly object: R2ObjectBody,
    private readonly ms: number,
  ) {
    this.key = object.key;
    this.version = object.version;
    this.size = object.size;
    this.etag = object.etag;
    this.httpEtag = object.httpEtag;
    this.checksums = object.checksums;
    this.uploaded = object.uploaded;
    this.httpMetadata = object.httpMetadata;
    this.customMetadata = object.customMetadata;
    this.range = object.range;
    this.storageClass = object.storageClass;
    this.ssecKeyMd5 = object.ssecKeyMd5;
  }

  writeHttpMetadata(headers: Headers): void {
    this.object.writeHttpMetadata(headers);
  }

  /** Made on first use: a body read whole never pays for a stream of its own. */
  get body(): ReadableStream<Uint8Array> {
    return (this.stream ??= boundedRead(this.object.body, this.ms, () => new BlobStoreTimeout("read", this.key, this.ms), (err) => asStorageFault("read", this.key, err)));
  }

  get bodyUsed(): boolean {
    return this.object.bodyUsed;
  }

  /** R2's own whole read, one timer for all of it. */
  private whole<T>(read: Promise<T>): Promise<T> {
    return bounded("read", this.key, this.ms, read);
  }

  arrayBuffer(): Promise<ArrayBuffer> {
    return this.whole(this.object.arrayBuffer());
  }

  bytes(): Promise<Uint8Array> {
    return this.whole(this.object.bytes());
  }

  text(): Promise<string> {
    return this.whole(this.object.text());
  }

  json<T>(): Promise<T> {
    return this.whole(this.object.json<T>());
  }

  blob(): Promise<Blob> {
    return this.whole(this.object.blob());
  }
}
