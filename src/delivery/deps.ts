/** What a chat reply (./session.ts) needs from its Worker: the database, config, the artifact bucket, its chat's order. */
import { dbOf } from "../db/connect";
import { artifactsOf } from "../artifacts/bucket";
import type { Db } from "../db/client";
import { configOf, type Config, type Env } from "../env";
import { ReplyOrder } from "./reply-order";
import type { PostingMarks } from "./posting-marks";

export interface DeliveryDeps {
  db: Db;
  config: Config;
  /** Where the answer's files are read from. */
  artifacts: R2Bucket;
  /** The chat's replies in the order their runs ended (one per conversation object). */
  order: ReplyOrder;
  /** Where a call that may show in the chat is marked before it is made (the conversation object's storage), if anywhere. */
  marks?: PostingMarks;
}

/** The deps of one chat's replies (a conversation object's): they share one ReplyOrder, and the object's posting marks. */
export function chatReplyDeps(env: Env, marks?: PostingMarks): () => DeliveryDeps {
  const order = new ReplyOrder();
  return () => ({ db: dbOf(env), config: configOf(env), artifacts: artifactsOf(env), order, marks });
}
