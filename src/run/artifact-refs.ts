import type { Db } from "../db/client";
import { artifactAccess, type ArtifactReader } from "../artifacts/policy";
import type { ArtifactRef } from "../protocol/common";
import { artifactsStore, toArtifactRef } from "../stores/artifacts";
import { quotedAsSent, type QuoteScrub } from "./sent-secrets";

const REFUSAL = {
  not_found: "does not exist",
  other_conversation: "belongs to another conversation",
  other_audience: "is private to another user of this conversation",
  expired: "has expired",
} as const;

/**
 * The artifact refs a run attaches to its transcript items. A runner's
 * `artifact.created {artifact_id}` may only name an artifact the run could
 * read (its own upload, or one of its conversation's not private to other eyes than its answer's, unexpired), and the ref
 * written is the stored facts, not the runner's claims. Decisions are kept for
 * the whole run: a ref pending across result batches is looked up once.
 */
export class RunArtifactRefs {
  private readonly known = new Map<string, ArtifactRef | null>();
  /** Why each artifact this run stored but never recorded is refused (see `unstored`). */
  private readonly refusals = new Map<string, string>();
  /**
   * Why each reference the last `check` looked up is refused: kept for its batch only, so a runner naming artifacts it
   * may not attach (up to RUNNER_MAX_STREAM_BYTES of them) leaves nothing in memory; one named again is looked up again.
   */
  private readonly refusedNow = new Map<string, string>();

  constructor(
    private readonly db: Db,
    private readonly reader: ArtifactReader,
    /** What a refusal quoting an id the runner named leaves out (its run's secrets: ./sent-secrets.ts). */
    private readonly quote: QuoteScrub = quotedAsSent,
  ) {}

  /** An artifact this run just stored itself (inline content). */
  stored(ref: ArtifactRef) {
    this.known.set(ref.artifact_id, ref);
  }

  /** Artifacts this run meant to store whose rows were never written (their batch was refused, or R2 refused the blob): no item may name them. */
  unstored(artifactIds: string[], why = "its batch was refused") {
    for (const id of artifactIds) {
      this.known.set(id, null);
      this.refusals.set(id, `artifact ${id} was never stored (${why})`);
    }
  }

  /** Look up the referenced ids not seen yet; `refusal` then says which may not be attached. */
  async check(artifactIds: string[]): Promise<void> {
    this.refusedNow.clear();
    const fresh = [...new Set(artifactIds)].filter((id) => !this.known.has(id));
    if (fresh.length === 0) return;
    const rows = new Map((await artifactsStore(this.db).readBy(fresh, this.reader)).map((r) => [r.artifactId, r]));
    const now = Date.now();
    for (const id of fresh) {
      const row = rows.get(id);
      const access = row ? artifactAccess(row, this.reader, now) : "not_found";
      if (access === "granted") this.known.set(id, toArtifactRef(row!));
      else this.refusedNow.set(id, `artifact ${this.quote(id)} ${REFUSAL[access]}`);
    }
  }

  /** Why a checked reference may not be attached, or null when it may. */
  refusal(artifactId: string): string | null {
    return this.refusals.get(artifactId) ?? this.refusedNow.get(artifactId) ?? null;
  }

  /**
   * A message's content elements as its transcript item keeps them: without those naming an artifact this run meant to
   * store but never did, so history never sends a later run after bytes that do not exist (the ledger keeps the message
   * as sent, and the warning saying what was lost).
   */
  withoutUnstored(content: unknown): unknown {
    if (!Array.isArray(content) || this.refusals.size === 0) return content;
    const named = (el: unknown) => (el !== null && typeof el === "object" ? (el as { artifact_id?: unknown }).artifact_id : undefined);
    const kept = content.filter((el) => {
      const id = named(el);
      return typeof id !== "string" || !this.refusals.has(id);
    });
    return kept.length === content.length ? content : kept;
  }

  /** The refs to write: checked ones replaced by their stored facts, refused ones left out. */
  resolve(refs: ArtifactRef[]): ArtifactRef[] {
    return refs.flatMap((r) => this.known.get(r.artifact_id) ?? []);
  }
}
