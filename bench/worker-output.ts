import { withoutDecisionLines } from "../local/host";

/**
 * Where a benchmark host's Worker output goes (one filter per host): stderr, less the Host API
 * decision lines (one per call), so stdout carries only the JSON report.
 */
export const workerOutputToStderr = () => withoutDecisionLines((text) => process.stderr.write(text));
