import { mayHaveApplied } from "../db/executor";
import type { WriteBudget } from "../lib/write-budget";
import { ApiError } from "./errors";

/**
 * A Host API write taken from one of its run's budgets (state, storage), or refused 429 past `limit`: the budget does
 * not come back within the run (beyond refused writes, below), so a retry cannot help.
 */
export function takeFromBudget(budget: WriteBudget, limit: number, refusal: string): void {
  if (!budget.take(limit)) throw new ApiError("rate_limited", refusal, { retryable: false, details: { limit } });
}

/**
 * What a Host API write counted against a run's budget does when it fails: a write the database refused (not applied)
 * gives its place back, so a runner retrying it as told keeps its whole budget; one unanswered may have been applied
 * and keeps it. The error goes on.
 */
export const givingBack =
  (budget: WriteBudget) =>
  (err: unknown): never => {
    if (!mayHaveApplied(err)) budget.giveBack();
    throw err;
  };
