import type { Db } from "../db/client";
import { artifactAccess, type ArtifactOwner } from "../artifacts/policy";
import type { ArtifactRef } from "../protocol/common";
import type { HostRecord } from "../stores/event-log";
import { artifactsStore, toArtifactRef } from "../stores/artifacts";

const REFUSAL = { not_found: "which does not exist", other_conversation: "which belongs to another conversation", expired: "which has expired" } as const;

/**
 * The artifact refs a run attaches to its transcript items. A runner's
 * `artifact.created {artifact_id}` may only name an artifact the run could
 * read (its own upload, or one of its conversation's, unexpired), and the ref
 * written is the stored facts, not the runner's claims. Decisions are kept for
 * the whole run: a ref pending across result batches is looked up once.
 */
export class RunArtifactRefs {
  private readonly known = new Map<string, ArtifactRef | null>();

  constructor(
    private readonly db: Db,
    private readonly owner: ArtifactOwner & { runId: string },
  ) {}

  /** An artifact this run just stored itself (inline content). */
  stored(ref: ArtifactRef) {
    this.known.set(ref.artifact_id, ref);
  }

  /** Artifacts this run stored whose rows were never written (their batch was refused): no item may name them. */
  unstored(artifactIds: string[]) {
    for (const id of artifactIds) this.known.set(id, null);
  }

  /** Look up the referenced ids not seen yet; one audit record per refused reference. */
  async check(refs: ArtifactRef[], audit: (id: string, reason: string) => HostRecord): Promise<HostRecord[]> {
    const fresh = [...new Set(refs.map((r) => r.artifact_id))].filter((id) => !this.known.has(id));
    if (fresh.length === 0) return [];
    const rows = new Map((await artifactsStore(this.db).getMany(fresh)).map((r) => [r.artifactId, r]));
    const audits: HostRecord[] = [];
    const now = Date.now();
    for (const id of fresh) {
      const row = rows.get(id);
      const access = row ? artifactAccess(row, this.owner, now) : "not_found";
      this.known.set(id, access === "granted" ? toArtifactRef(row!) : null);
      if (access !== "granted") audits.push(audit(id, `artifact.created names artifact ${id}, ${REFUSAL[access]}`));
    }
    return audits;
  }

  /** The refs to write: checked ones replaced by their stored facts, refused ones left out. */
  resolve(refs: ArtifactRef[]): ArtifactRef[] {
    return refs.flatMap((r) => this.known.get(r.artifact_id) ?? []);
  }
}
