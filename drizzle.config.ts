import { defineConfig } from "drizzle-kit";

// `npm run db:generate` writes SQL migrations from the schema;
// `npm run db:migrate` applies them to LIBSQL_URL (Turso/sqld) in production.
const url = process.env.LIBSQL_URL?.trim();
// Without LIBSQL_URL a migrate has no production database to apply to: it refuses rather than migrate another one
// (`npm start` migrates its own embedded file itself) and report success while the production database stays as it was.
if (!url && process.argv.includes("migrate")) {
  console.error(
    "npm run db:migrate: LIBSQL_URL is not set. Run it as LIBSQL_URL=libsql://<db>.turso.io LIBSQL_AUTH_TOKEN=… npm run db:migrate (the local `npm start` database is migrated by npm start itself).",
  );
  process.exit(1);
}

export default defineConfig({
  dialect: "turso",
  schema: "./src/db/schema.ts",
  out: "./migrations",
  dbCredentials: {
    url: url ?? "file:.data/host.db",
    authToken: process.env.LIBSQL_AUTH_TOKEN,
  },
});
