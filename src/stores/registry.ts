import { and, eq, getTableColumns, inArray, ne, notInArray, sql, type SQL } from "drizzle-orm";
import { budgetedPage, fieldsOf, ifWithin, rowBytes, withinBudget } from "../db/byte-budget";
import { insertWhere } from "../db/guarded";
import type { BatchItem, Db } from "../db/client";
import { runner, runnerService } from "../db/schema";
import { noteDeletedService } from "./deleted-owners";
import { iso, parseJson } from "../lib/json";
import { updatedAtOf } from "../lib/updated-at";
import { maskUrl } from "../resources/secrets";
import { sameBaseUrl } from "../lib/url";
import { pageQuery, type ListPage } from "./list-page";

export type RunnerServiceRow = typeof runnerService.$inferSelect;
export type RunnerRow = typeof runner.$inferSelect;

/** Public view: never includes the service secret, and credentials in its URL are masked. */
export function toServiceView(row: RunnerServiceRow, runnerIds: string[]) {
  return {
    service_id: row.serviceId,
    base_url: maskUrl(row.baseUrl),
    has_secret: Boolean(row.secret),
    author: row.author ?? undefined,
    name: row.name ?? undefined,
    version: row.version ?? undefined,
    last_error: row.lastError ?? undefined,
    fetched_at: iso(row.fetchedAt),
    updated_at: iso(updatedAtOf(row)),
    runners: runnerIds,
  };
}

export function toRunnerView(row: RunnerRow) {
  return { runner_id: row.runnerId, service_id: row.serviceId, name: row.name, manifest: parseJson<unknown>(row.manifestJson, {}) };
}

/** SQL: the runner is registered and its service is at `baseUrl` (where an agent's secret config fields were sealed for). */
export const runnerServiceAt = (runnerId: string, baseUrl: string) =>
  sql`EXISTS (SELECT 1 FROM ${runner} JOIN ${runnerService} ON ${runnerService.serviceId} = ${runner.serviceId} WHERE ${runner.runnerId} = ${runnerId} AND ${runnerService.baseUrl} = ${baseUrl})`;

/** A page of `GET /v1/admin/runners` carries at most this many bytes of manifests past its first runner. */
export const RUNNERS_PAGE_MAX_BYTES = 4 * 1024 * 1024;

export function registryStore(db: Db) {
  return {
    getService: (serviceId: string) => db.select().from(runnerService).where(eq(runnerService.serviceId, serviceId)).get(),
    /**
     * The service at this (normalised) address, also one stored under another spelling of it by a version that kept
     * addresses as sent: those rows keep their spelling (their secrets are sealed for it) until a POST or PUT moves them.
     */
    async getServiceAt(baseUrl: string): Promise<RunnerServiceRow | undefined> {
      const exact = await db.select().from(runnerService).where(eq(runnerService.baseUrl, baseUrl)).get();
      if (exact) return exact;
      // Services are few (an operator registers each), and their addresses short: read whole rather than guessed at in SQL.
      const all = await db.select({ serviceId: runnerService.serviceId, baseUrl: runnerService.baseUrl }).from(runnerService).all();
      const other = all.find((s) => sameBaseUrl(s.baseUrl, baseUrl));
      return other ? this.getService(other.serviceId) : undefined;
    },
    /** The ids of a service's runners (no manifests: those are read only where needed). */
    async runnerIdsOf(serviceId: string): Promise<string[]> {
      return (await this.runnerIdsOfServices([serviceId])).get(serviceId) ?? [];
    },
    /** The ids of each service's runners, in one read. */
    async runnerIdsOfServices(serviceIds: string[]): Promise<Map<string, string[]>> {
      const byService = new Map<string, string[]>();
      if (!serviceIds.length) return byService;
      const rows = await db.select({ serviceId: runner.serviceId, runnerId: runner.runnerId }).from(runner).where(inArray(runner.serviceId, serviceIds)).orderBy(runner.runnerId).all();
      for (const r of rows) byService.set(r.serviceId, [...(byService.get(r.serviceId) ?? []), r.runnerId]);
      return byService;
    },
    /** The config_schema of each of these runners (a JSON text, null without one), not their whole manifests. */
    async configSchemasOf(runnerIds: string[]): Promise<Map<string, string | null>> {
      if (!runnerIds.length) return new Map();
      const rows = await db.select({ runnerId: runner.runnerId, schema: sql<string | null>`json_extract(${runner.manifestJson}, '$.config_schema')` }).from(runner).where(inArray(runner.runnerId, runnerIds)).all();
      return new Map(rows.map((r) => [r.runnerId, r.schema]));
    },
    /** Which other service holds one of these runner ids, if any. */
    async serviceHolding(runnerIds: string[], exceptServiceId: string): Promise<string | undefined> {
      if (!runnerIds.length) return undefined;
      return (await db.select({ serviceId: runner.serviceId }).from(runner).where(and(inArray(runner.runnerId, runnerIds), ne(runner.serviceId, exceptServiceId))).limit(1).get())?.serviceId;
    },
    /**
     * A page of runners in id order, cut in the database at RUNNERS_PAGE_MAX_BYTES of manifests past its first: a
     * page of 200 runners of megabyte manifests never travels whole.
     */
    async runnersPage(page: ListPage): Promise<{ rows: RunnerRow[]; hasMore: boolean }> {
      const q = pageQuery({ id: runner.runnerId }, page);
      const read = db
        .select({ ...getTableColumns(runner), own: rowBytes(runner.manifestJson).as("own") })
        .from(runner)
        .where(q.where)
        .orderBy(...q.orderBy)
        .limit(q.limit)
        .as("read");
      const within = withinBudget(read.own, sql`order by ${read.runnerId}`, RUNNERS_PAGE_MAX_BYTES);
      const rows = await db
        .select({ ...fieldsOf(read, getTableColumns(runner)), manifestJson: ifWithin<string>(within, read.manifestJson), within })
        .from(read)
        .orderBy(read.runnerId)
        .all();
      // Rows within the budget have every column: the nulls are only on rows past it, which budgetedPage drops.
      return budgetedPage(rows, page.limit) as { rows: RunnerRow[]; hasMore: boolean };
    },
    getRunner: (runnerId: string) => db.select().from(runner).where(eq(runner.runnerId, runnerId)).get(),

    /** Why the service's manifest could not be read at `baseUrl` (only while it is still there). */
    async noteRefreshFailed(serviceId: string, baseUrl: string, message: string) {
      await db.update(runnerService).set({ lastError: message }).where(and(eq(runnerService.serviceId, serviceId), eq(runnerService.baseUrl, baseUrl)));
    },

    /** The service and its runners; its plugin storage, which nobody could reach again (a new registration gets a new id), is noted for retention to delete. */
    async removeService(serviceId: string) {
      await db.batch([noteDeletedService(db, serviceId), db.delete(runner).where(eq(runner.serviceId, serviceId)), db.delete(runnerService).where(eq(runnerService.serviceId, serviceId))]);
    },

    /**
     * Save a fetched manifest and replace the service's runners: one batch. Runners it still lists are updated in
     * place, only the others deleted (the database refuses to delete one an agent runs on: `runner_in_use`).
     * `read`: the stored service the manifest was fetched for, saved only if it is still there (a DELETE answered
     * while the manifest was fetched is not undone), and, with its `updatedAt` given, only while that is still the
     * stored one (a POST or PUT is not saved over a change landed meanwhile; null matches a service stored before it
     * had one); null for a new one. False when it was gone. `also`: statements that go with the save (agent configs
     * sealed again for a moved service); `alsoAsRead`: what they were built from is unchanged (the save applies only
     * then).
     */
    async saveService(service: typeof runnerService.$inferInsert, runners: (typeof runner.$inferInsert)[], read: { createdAt: number; baseUrl: string; updatedAt?: number | null } | null, also: BatchItem[] = [], alsoAsRead?: SQL): Promise<boolean> {
      const { serviceId, ...rest } = service;
      const same = and(eq(runnerService.serviceId, serviceId), eq(runnerService.createdAt, read?.createdAt ?? service.createdAt));
      const unchangedSince = read?.updatedAt === undefined ? undefined : sql`${runnerService.updatedAt} IS ${read.updatedAt}`;
      // Once saved it is at the new address: the statements after the first apply only if the first did.
      const stillThere = sql`EXISTS (SELECT 1 FROM ${runnerService} WHERE ${and(same, eq(runnerService.baseUrl, service.baseUrl))})`;
      const [saved] = await db.batch([
        // Over the service as read only: a move (PUT) landing meanwhile is not undone with the address read before it.
        read ? db.update(runnerService).set(rest).where(and(same, eq(runnerService.baseUrl, read.baseUrl), unchangedSince, alsoAsRead)).returning({ serviceId: runnerService.serviceId }) : db.insert(runnerService).values(service).returning({ serviceId: runnerService.serviceId }),
        db.delete(runner).where(and(eq(runner.serviceId, serviceId), notInArray(runner.runnerId, runners.map((r) => r.runnerId)), stillThere)),
        // Each runner updated if it is this service's, else inserted: an id another service holds fails the insert.
        ...runners.flatMap(({ runnerId, ...fields }) => {
          const ours = and(eq(runner.runnerId, runnerId), eq(runner.serviceId, serviceId));
          return [db.update(runner).set(fields).where(ours), insertWhere(db, runner, { runnerId, ...fields }, sql`NOT EXISTS (SELECT 1 FROM ${runner} WHERE ${ours}) AND ${stillThere}`)];
        }),
        ...also,
      ]);
      return saved.length > 0;
    },
  };
}
