import { defineConfig } from "drizzle-kit";

// `npm run db:generate` writes SQL migrations from the schema;
// `npm run db:migrate` applies them to LIBSQL_URL (Turso/sqld) in production.
export default defineConfig({
  dialect: "turso",
  schema: "./src/db/schema.ts",
  out: "./migrations",
  dbCredentials: {
    url: process.env.LIBSQL_URL ?? "file:.data/host.db",
    authToken: process.env.LIBSQL_AUTH_TOKEN,
  },
});
