import { and, eq, notInArray, sql, type SQL } from "drizzle-orm";
import { insertWhere } from "../db/guarded";
import type { BatchItem, Db } from "../db/client";
import { runner, runnerService, storage } from "../db/schema";
import { iso, parseJson } from "../lib/json";
import { maskUrl } from "../resources/secrets";

export type RunnerServiceRow = typeof runnerService.$inferSelect;
export type RunnerRow = typeof runner.$inferSelect;

/** Public view: never includes the service secret, and credentials in its URL are masked. */
export function toServiceView(row: RunnerServiceRow, runners: RunnerRow[]) {
  return {
    service_id: row.serviceId,
    base_url: maskUrl(row.baseUrl),
    has_secret: Boolean(row.secret),
    author: row.author ?? undefined,
    name: row.name ?? undefined,
    version: row.version ?? undefined,
    last_error: row.lastError ?? undefined,
    fetched_at: iso(row.fetchedAt),
    runners: runners.map((r) => r.runnerId),
  };
}

export function toRunnerView(row: RunnerRow) {
  return { runner_id: row.runnerId, service_id: row.serviceId, name: row.name, manifest: parseJson<unknown>(row.manifestJson, {}) };
}

/** SQL: the runner is registered and its service is at `baseUrl` (where an agent's secret config fields were sealed for). */
export const runnerServiceAt = (runnerId: string, baseUrl: string) =>
  sql`EXISTS (SELECT 1 FROM ${runner} JOIN ${runnerService} ON ${runnerService.serviceId} = ${runner.serviceId} WHERE ${runner.runnerId} = ${runnerId} AND ${runnerService.baseUrl} = ${baseUrl})`;

export function registryStore(db: Db) {
  return {
    getService: (serviceId: string) => db.select().from(runnerService).where(eq(runnerService.serviceId, serviceId)).get(),
    getServiceByUrl: (baseUrl: string) => db.select().from(runnerService).where(eq(runnerService.baseUrl, baseUrl)).get(),
    listRunners: () => db.select().from(runner).orderBy(runner.runnerId).all(),
    runnersOf: (serviceId: string) => db.select().from(runner).where(eq(runner.serviceId, serviceId)).orderBy(runner.runnerId).all(),
    getRunner: (runnerId: string) => db.select().from(runner).where(eq(runner.runnerId, runnerId)).get(),

    /** Why the service's manifest could not be read at `baseUrl` (only while it is still there). */
    async noteRefreshFailed(serviceId: string, baseUrl: string, message: string) {
      await db.update(runnerService).set({ lastError: message }).where(and(eq(runnerService.serviceId, serviceId), eq(runnerService.baseUrl, baseUrl)));
    },

    /** The service, its runners and its plugin storage, which nobody could reach again (a new registration gets a new id). */
    async removeService(serviceId: string) {
      await db.batch([
        db.delete(runner).where(eq(runner.serviceId, serviceId)),
        db.delete(runnerService).where(eq(runnerService.serviceId, serviceId)),
        db.delete(storage).where(and(eq(storage.area, "plugin"), eq(storage.ownerKey, serviceId))),
      ]);
    },

    /**
     * Save a fetched manifest and replace the service's runners: one batch. Runners it still lists are updated in
     * place, only the others deleted (the database refuses to delete one an agent runs on: `runner_in_use`).
     * `read`: the stored service the manifest was fetched for, saved only if it is still there (a DELETE answered
     * while the manifest was fetched is not undone); null for a new one. False when it was gone. `also`: statements
     * that go with the save (agent configs sealed again for a moved service); `alsoAsRead`: what they were built
     * from is unchanged (the save applies only then).
     */
    async saveService(service: typeof runnerService.$inferInsert, runners: (typeof runner.$inferInsert)[], read: { createdAt: number; baseUrl: string } | null, also: BatchItem[] = [], alsoAsRead?: SQL): Promise<boolean> {
      const { serviceId, ...rest } = service;
      const same = and(eq(runnerService.serviceId, serviceId), eq(runnerService.createdAt, read?.createdAt ?? service.createdAt));
      // Once saved it is at the new address: the statements after the first apply only if the first did.
      const stillThere = sql`EXISTS (SELECT 1 FROM ${runnerService} WHERE ${and(same, eq(runnerService.baseUrl, service.baseUrl))})`;
      const [saved] = await db.batch([
        // Over the service as read only: a move (PUT) landing meanwhile is not undone with the address read before it.
        read ? db.update(runnerService).set(rest).where(and(same, eq(runnerService.baseUrl, read.baseUrl), alsoAsRead)).returning({ serviceId: runnerService.serviceId }) : db.insert(runnerService).values(service).returning({ serviceId: runnerService.serviceId }),
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
