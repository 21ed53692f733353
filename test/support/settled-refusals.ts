import type { TestHost } from "./host";

type Host = Pick<TestHost, "query" | "waitForRun">;
import { waitFor } from "./fake-platform";

/** A run's `delivery.failed` records, oldest first. */
export async function deliveryFailures(host: Host, runId: string): Promise<Record<string, unknown>[]> {
  const rows = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed' ORDER BY seq", [runId]);
  return rows.map((r) => JSON.parse(r.data_json) as Record<string, unknown>);
}

/**
 * Each run's delivery refusals once its reply has settled: the run ended, its first refusal recorded, and a second
 * more given to any later call, which a reply stopped at its first refusal never makes.
 */
export async function settledRefusals(host: Host, runIds: string[]): Promise<Record<string, unknown>[][]> {
  for (const runId of runIds) {
    await host.waitForRun(runId);
    await waitFor(async () => (await deliveryFailures(host, runId)).length > 0, 15_000, "the refusal's record");
  }
  await new Promise((r) => setTimeout(r, 1_000));
  return Promise.all(runIds.map((runId) => deliveryFailures(host, runId)));
}
