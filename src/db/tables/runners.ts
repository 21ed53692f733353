/** Registered runner services and the runners their manifests declare. */
import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

/** A registered runner service (one manifest). */
export const runnerService = sqliteTable(
  "runner_service",
  {
    serviceId: text("service_id").primaryKey(),
    baseUrl: text("base_url").notNull(),
    // Shared HMAC secret used to sign run requests; never returned by any API.
    secret: text("secret"),
    author: text("author"),
    name: text("name"),
    version: text("version"),
    manifestJson: text("manifest_json"),
    lastError: text("last_error"),
    fetchedAt: integer("fetched_at"),
    createdAt: integer("created_at").notNull(),
    // Strictly later at each PUT, and POST of its address (src/lib/updated-at.ts), not at a refresh (`fetched_at` says when);
    // null on rows stored before migration 0028: created_at stands for it.
    updatedAt: integer("updated_at"),
  },
  (t) => [uniqueIndex("runner_service_base_url").on(t.baseUrl), index("runner_service_created").on(t.createdAt, t.serviceId)],
);

/** A runner inside a service, id `http:{author}/{name}/{runner}`. */
export const runner = sqliteTable(
  "runner",
  {
    runnerId: text("runner_id").primaryKey(),
    serviceId: text("service_id").notNull(),
    name: text("name").notNull(),
    manifestJson: text("manifest_json").notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [index("runner_by_service").on(t.serviceId)],
);
