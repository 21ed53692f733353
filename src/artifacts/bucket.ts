import { configOf, type Env } from "../env";
import { BoundedBucket } from "./bounded-bucket";

const cache = new WeakMap<object, BoundedBucket>();

/**
 * The ARTIFACTS bucket as the host uses it: every call bounded by BLOB_OP_TIMEOUT_MS (./bounded-bucket.ts) and, given
 * `deadlineAt`, by then too (a platform waiting for its answer). Made once per environment, as dbOf.
 */
export function artifactsOf(env: Env, deadlineAt?: number): BoundedBucket {
  let bucket = cache.get(env);
  if (!bucket) {
    bucket = new BoundedBucket(env.ARTIFACTS, configOf(env).BLOB_OP_TIMEOUT_MS);
    cache.set(env, bucket);
  }
  return bucket.by(deadlineAt);
}
