/**
 * Binary inputs of an event, stored before the run (PROTOCOL §5: "binary
 * inputs are stored as artifacts first and passed by reference"). Used by the
 * HTTP ingress and by any adapter that downloads a platform's files.
 *
 * Blobs go to R2 here; the metadata rows are returned, not written, so the
 * caller inserts them in its one ingress batch, guarded on owning the event.
 */
import type { Db } from "../db/client";
import type { Config } from "../env";
import { sha256Hex } from "../lib/crypto";
import { HostError } from "../lib/errors";
import { newId } from "../lib/ids";
import { withOpaqueCauses } from "../lib/opaque-fetch-failure";
import { labelOrNull, mediaTypeOrNull, type ArtifactRef } from "../protocol/common";
import { artifactsStore, toArtifactRef, type ArtifactRow } from "../stores/artifacts";
import { artifactAccess, artifactExpiry, artifactR2Key, artifactTypeOf } from "./policy";
import { readCapped } from "./read-capped";
import { BlobStoreUnavailable } from "./blob-fault";
import { BlobStoreTimeout } from "./blob-timeout";

export interface InputAttachmentMeta {
  name?: string | null;
  mimeType?: string | null;
  artifactType?: string | null;
  /** Facts kept in the artifact's metadata (where a platform's file came from); the host's own keys win. */
  metadata?: Record<string, string>;
}

/**
 * A URL's refusal handed back to its platform: the headers to fetch it once more with (a short-lived token the
 * platform says is stale, fetched anew), or null when the refusal stands. `timeoutMs`: the time left to fetch it.
 */
export type Reauthorize = (refusal: { status: number; body: string }, timeoutMs: number) => Promise<Record<string, string> | null>;

/** Where an input's bytes come from; `artifact` re-uses an artifact the conversation already has. */
export type InputAttachmentSource =
  | ({ kind: "bytes"; bytes: Uint8Array } & InputAttachmentMeta)
  | ({ kind: "url"; url: string; headers?: Record<string, string>; reauthorize?: Reauthorize } & InputAttachmentMeta)
  /**
   * `namedAt`: where the event named it, when not in its attachments (an element of `input.contents`).
   * `repliedMessageId`: a file of the message a chat reply answers, as stored when that message was received.
   */
  | { kind: "artifact"; artifactId: string; namedAt?: string; repliedMessageId?: string }
  /**
   * Stored by this attempt already, its row not yet written (a chat reply's own files, fetched while the message it
   * replies to was read: src/platforms/own-files-alongside.ts): the row joins the batch, the blob is this attempt's.
   */
  | { kind: "stored"; row: ArtifactRow };

export interface InputArtifactOwner {
  eventId: string;
  conversationKey: string;
  conversationId: string;
}

export interface StoredInputAttachments {
  /** In source order: what the runner gets in `input.attachments`. */
  refs: ArtifactRef[];
  /** New artifact rows, for the caller's ingress batch. */
  rows: ArtifactRow[];
  /** The R2 keys this attempt wrote: removed unless this attempt's event is the one recorded. */
  written: string[];
  /** With `optional`: why each source left out could not be stored. */
  unavailable: string[];
}

interface Deps {
  db: Db;
  bucket: R2Bucket;
  config: Config;
  /** URL fetches end by this time (ms since the epoch), e.g. a platform's acknowledgement deadline. */
  fetchDeadlineAt?: number;
}

const label = (index: number) => `input.attachments.${index}`;

/**
 * Store each source's bytes in R2 (a key of this attempt's own) and answer
 * the refs in source order plus the rows to insert. Refuses with a HostError
 * (400 / 413), or R2's error (a BlobStoreUnavailable when R2 failed or did not answer), and
 * removes what it wrote when any source fails, unless `optional` (a chat
 * platform's files: the message runs without the ones that could not be
 * fetched, or stored in time), when a source that fails is left out and its reason kept.
 */
export async function storeInputAttachments(
  deps: Deps,
  owner: InputArtifactOwner,
  sources: InputAttachmentSource[],
  { now = Date.now(), optional = false }: { now?: number; optional?: boolean } = {},
): Promise<StoredInputAttachments> {
  const refs: ArtifactRef[] = [];
  const rows: ArtifactRow[] = [];
  // This attempt's from the start: a failure before they are reached removes them too.
  const written: string[] = storedKeysOf(sources);
  const unavailable: string[] = [];
  // R2 did not answer a put (`optional` only): the files after it are left out too, unfetched, not each waited for.
  let storageAway: BlobStoreTimeout | null = null;
  try {
    const reused = await reusedArtifacts(deps.db, owner, sources, now, optional ? unavailable : null);
    // One at a time: at most one fetched body is in memory.
    for (const [index, source] of sources.entries()) {
      if (source.kind === "artifact") {
        const ref = reused.get(source.artifactId);
        if (ref) refs.push(ref);
        continue;
      }
      if (source.kind === "stored") {
        rows.push(source.row);
        refs.push(toArtifactRef(source.row));
        continue;
      }
      const leftOut = (why: string) => unavailable.push(source.name ? `${source.name} (${why})` : why);
      if (storageAway) {
        leftOut(notStored(storageAway));
        continue;
      }
      try {
        const row = await storeOne(deps, owner, source, index, now, written);
        rows.push(row);
        refs.push(toArtifactRef(row));
      } catch (err) {
        // A chat's file R2 does not take (in time) is left out as one not fetched is: the message still runs. Only
        // R2 not answering leaves out the files after it too: a refusal costs the next file no wait.
        if (optional && err instanceof BlobStoreTimeout) leftOut(notStored((storageAway = err)));
        else if (optional && err instanceof BlobStoreUnavailable) leftOut(notStored(err));
        else if (optional && err instanceof HostError && err.status < 500) leftOut(err.message);
        else throw err;
      }
    }
  } catch (err) {
    // The event is refused, so no row will ever name these blobs: removed, best effort (the orphan walk takes what is
    // left). Not waited for when R2 has just not answered: the refusal is not held up by a second wait as long.
    if (written.length) {
      const removing = deps.bucket.delete(written).catch(() => undefined);
      if (!(err instanceof BlobStoreTimeout)) await removing;
    }
    throw err;
  }
  return { refs, rows, written, unavailable };
}

const notStored = (err: BlobStoreUnavailable) => (err instanceof BlobStoreTimeout ? `not stored: storage did not answer within ${err.timeoutMs} ms` : "not stored: storage failed");

/** The blobs of `stored` sources: this attempt wrote them, and no row names them until its batch does. */
export const storedKeysOf = (sources: InputAttachmentSource[]): string[] => sources.flatMap((s) => (s.kind === "stored" ? [s.row.r2Key] : []));

/**
 * References to existing artifacts: only this conversation's, only unexpired; the stored facts win. `leftOut`: where
 * the refusal of one goes when it is left out rather than refusing the event (a chat reply's replied file, stored when
 * its message was received, that a recall expired since it was looked up).
 */
async function reusedArtifacts(db: Db, owner: InputArtifactOwner, sources: InputAttachmentSource[], now: number, leftOut: string[] | null) {
  const wanted = sources.flatMap((s, index) => (s.kind === "artifact" ? [{ id: s.artifactId, at: s.namedAt ?? label(index) }] : []));
  const found = new Map((await artifactsStore(db).getMany(wanted.map((w) => w.id))).map((r) => [r.artifactId, r]));
  const refs = new Map<string, ArtifactRef>();
  for (const { id, at } of wanted) {
    const row = found.get(id);
    const access = row ? artifactAccess(row, { conversationKey: owner.conversationKey }, now) : "other_conversation";
    // Same answer for "absent" and "another conversation's": existence is not disclosed.
    const refusal = access === "other_conversation" ? `${at}: artifact ${id} is not an artifact of this conversation` : access === "expired" ? `${at}: artifact ${id} has expired` : null;
    if (refusal !== null && leftOut) leftOut.push(refusal);
    else if (refusal !== null) throw new HostError(400, "invalid_request", refusal);
    else refs.set(id, toArtifactRef(row!));
  }
  return refs;
}

async function storeOne(
  deps: Deps,
  owner: InputArtifactOwner,
  source: Extract<InputAttachmentSource, { kind: "bytes" | "url" }>,
  index: number,
  now: number,
  written: string[],
): Promise<ArtifactRow> {
  const max = deps.config.INPUT_ATTACHMENT_MAX_BYTES;
  const tooLarge = () => new HostError(413, "payload_too_large", `${label(index)}: attachment larger than ${max} bytes`);
  let bytes: Uint8Array;
  let mimeType = source.mimeType ?? null;
  let name = source.name ?? null;
  if (source.kind === "bytes") {
    if (source.bytes.length > max) throw tooLarge();
    bytes = source.bytes;
  } else {
    const timeoutMs = Math.min(deps.config.INPUT_ATTACHMENT_FETCH_TIMEOUT_MS, (deps.fetchDeadlineAt ?? Infinity) - Date.now());
    const fetched = await fetchAttachment(source, { timeoutMs, maxBytes: deps.config.INPUT_ATTACHMENT_MAX_BYTES, declaredType: mimeType }, index);
    if (fetched === "too_large") throw tooLarge();
    bytes = fetched.bytes;
    mimeType ??= fetched.contentType;
    name ??= fileNameOf(source.url);
  }
  // What came from a URL or a platform is kept only when it could have been given in an envelope (stored as shown).
  name = labelOrNull(name, 255);
  mimeType = mediaTypeOrNull(mimeType);

  // An id of this attempt's own, never derived from the event's: two deliveries of one event in flight at once (or
  // an event id reused after retention) never share a blob, so an attempt that fails or loses removes only its own.
  const artifactId = newId("art_in");
  const r2Key = artifactR2Key(artifactId);
  const sha256 = await sha256Hex(bytes);
  await deps.bucket.put(r2Key, bytes, { httpMetadata: mimeType ? { contentType: mimeType } : undefined, sha256 });
  written.push(r2Key);
  return {
    artifactId,
    artifactType: source.artifactType ?? artifactTypeOf(mimeType),
    mimeType,
    name,
    sizeBytes: bytes.length,
    sha256,
    source: "input",
    conversationKey: owner.conversationKey,
    conversationId: owner.conversationId,
    runId: null,
    runnerId: null,
    r2Key,
    // Not the URL: signed URLs carry credentials.
    metadataJson: JSON.stringify({ ...source.metadata, event_id: owner.eventId, input_index: index, origin: source.kind }),
    createdAt: now,
    expiresAt: artifactExpiry(deps.config, now),
  };
}

/** A refusal's body, as far as a platform needs it to say why (its error code). */
const REFUSAL_MAX_BYTES = 16 * 1024;

async function fetchAttachment(
  { url, headers, reauthorize }: Extract<InputAttachmentSource, { kind: "url" }>,
  { timeoutMs, maxBytes, declaredType }: { timeoutMs: number; maxBytes: number; declaredType: string | null },
  index: number,
) {
  const unavailable = (why: string, cause?: unknown) => new HostError(400, "attachment_unavailable", `${label(index)}: ${why}`, undefined, { cause });
  if (timeoutMs <= 0) throw unavailable("no time left to fetch it");
  // One bound for every step, a second fetch after a refusal included.
  const endsAt = Date.now() + timeoutMs;
  const signal = AbortSignal.timeout(timeoutMs);
  const get = async (given: Record<string, string> | undefined) => {
    try {
      return await fetch(url, { headers: given, signal, redirect: "follow" });
    } catch (cause) {
      // workerd's opaque failure says its known causes; the URL is never named (signed URLs carry credentials).
      throw unavailable(withOpaqueCauses("the URL could not be fetched", cause), cause);
    }
  };
  let res = await get(headers);
  // Refused, perhaps for a credential that went stale since it was given: its platform may give another, once.
  const again = !res.ok && reauthorize ? await reauthorize({ status: res.status, body: await refusalText(res) }, endsAt - Date.now()).catch(() => null) : null;
  if (again) res = await get(again);
  if (!res.ok) {
    // A refusal already read for its platform has no body left to cancel.
    if (!res.bodyUsed) await res.body?.cancel();
    throw unavailable(`the URL answered HTTP ${res.status}`);
  }
  const contentType = res.headers.get("content-type")?.split(";")[0].trim().toLowerCase() || null;
  // A web page for a file said to be something else: a sign-in page (Slack's, for a token that may not read the
  // file) or the file's page rather than the file. Never stored as the file.
  if (contentType === "text/html" && declaredType !== null && !/html/i.test(declaredType)) {
    await res.body?.cancel();
    throw unavailable(`the URL answered a web page (text/html), not the ${declaredType} it was given as: a sign-in page, or the file's page rather than the file`);
  }
  let bytes: Uint8Array | "too_large";
  try {
    bytes = await readCapped(res, maxBytes);
  } catch (cause) {
    throw unavailable(withOpaqueCauses("the URL's body could not be read", cause), cause);
  }
  if (bytes === "too_large") return bytes;
  return { bytes, contentType };
}

async function refusalText(res: Response): Promise<string> {
  const bytes = await readCapped(res, REFUSAL_MAX_BYTES).catch(() => "too_large" as const);
  return bytes === "too_large" ? "" : new TextDecoder().decode(bytes);
}

function fileNameOf(url: string): string | null {
  const last = new URL(url).pathname.split("/").pop();
  if (!last) return null;
  try {
    return decodeURIComponent(last);
  } catch {
    return last;
  }
}
