/** Work bounds of one cron invocation: at most batchSize × maxBatches deletions per kind. */
export interface BatchLimits {
  batchSize: number;
  maxBatches: number;
}

/** R2 deletes at most 1000 keys per call. */
export const R2_DELETE_MAX_KEYS = 1000;
