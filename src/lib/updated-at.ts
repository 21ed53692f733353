/**
 * An admin-managed row's updated_at: what a PUT's body sends back to say which copy it was read from
 * (src/routes/admin/replace.ts checkReadAsStored).
 */

/** A replaced row's updated_at: later than the one it replaces even within the same millisecond, so a copy read before a write never matches after it. */
export const nextUpdatedAt = (previous: number): number => Math.max(Date.now(), previous + 1);

/**
 * The row's updated_at; one with none (runner services, models, tools, MCP servers and knowledge bases stored before
 * migration 0028, or by the Worker before it meanwhile) was not replaced since: its creation stands for it.
 */
export const updatedAtOf = (row: { updatedAt: number | null; createdAt: number }): number => row.updatedAt ?? row.createdAt;

/** A new row's creation and updated_at: the same instant. */
export function createdNow(): { createdAt: number; updatedAt: number } {
  const now = Date.now();
  return { createdAt: now, updatedAt: now };
}
