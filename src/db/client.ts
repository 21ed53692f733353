import { drizzle, type SqliteRemoteDatabase } from "drizzle-orm/sqlite-proxy";
import * as schema from "./schema";
import type { SqlExecutor } from "./executor";

export type Db = SqliteRemoteDatabase<typeof schema>;

export function createDb(executor: SqlExecutor): Db {
  return drizzle(
    async (sql, params, method) => executor.query({ sql, params, method }),
    async (queries) => executor.batch(queries),
    { schema },
  );
}
