import type { Db } from "../db/client";
import { deletedOwnersStore, type DeletedOwnerKind } from "../stores/deleted-owners";
import type { BatchLimits } from "./limits";

const KINDS: DeletedOwnerKind[] = ["agent_state", "plugin_storage"];

/**
 * The state of deleted agents and the plugin storage of deleted runner services (stores/deleted-owners.ts), oldest
 * deletion first, at most `batchSize` rows per statement and `maxBatches` statements per kind and invocation:
 * deleting an agent that wrote a million keys costs its DELETE one row, and no statement here holds the write lock for
 * long.
 */
export async function deleteDeletedOwnersData(db: Db, limits: BatchLimits): Promise<number> {
  const store = deletedOwnersStore(db);
  let deleted = 0;
  for (const kind of KINDS) {
    for (let i = 0; i < limits.maxBatches; i++) {
      // An owner's note goes with its last rows; while rows are left, the next statement takes more of them.
      const some = await store.deleteSome(kind, limits.batchSize);
      if (some === null) break;
      deleted += some;
    }
  }
  return deleted;
}
