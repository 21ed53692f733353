import { mayHaveApplied } from "../db/executor";

/**
 * What a Host API write counted against a run's budget does when it fails: a write the database refused (not applied)
 * gives its place back, so a runner retrying it as told keeps its whole budget; one unanswered may have been applied
 * and keeps it. The error goes on.
 */
export const givingBack =
  (budget: { giveBack(): void }) =>
  (err: unknown): never => {
    if (!mayHaveApplied(err)) budget.giveBack();
    throw err;
  };
