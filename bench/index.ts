/**
 * `npm run bench`: every benchmark in one run, one JSON document on stdout.
 * Each target is a ratio against a floor measured in the same run, never an
 * absolute time.
 */
import { benchHistoryPage } from "./history-page";
import { benchHostOverhead } from "./host-overhead";
import { benchRetentionBacklog } from "./retention-backlog";
import { benchSteeringClaim } from "./steering-claim";

const report = {
  host_overhead: await benchHostOverhead(),
  steering_claim: await benchSteeringClaim(),
  history_page: await benchHistoryPage(),
  retention_backlog: await benchRetentionBacklog(),
};
console.log(JSON.stringify(report, null, 2));
