// The drizzle schema: every table, one file per domain under ./tables. drizzle-kit reads this file
// (drizzle.config.ts) and the stores import tables from it, so a table added there is exported here too.
//
// Times are integer milliseconds since the epoch; JSON columns are text.
// Every table a run or an ingress event touches is keyed so that reads used on
// hot paths (history paging, ledger replay, binding resolution) are index scans.
export * from "./tables/events";
export * from "./tables/runner-data";
export * from "./tables/artifacts";
export * from "./tables/runs";
export * from "./tables/runners";
export * from "./tables/agents";
export * from "./tables/resources";
export * from "./tables/bots";
