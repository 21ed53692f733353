import { withoutRoutineLines } from "../local/host";

/**
 * Where a benchmark host's Worker output goes (one filter per host): stderr, less the Host API
 * decision lines (one per call) and the end lines of runs that did not fail (one per run), so stdout carries only the
 * JSON report.
 */
export const workerOutputToStderr = () => withoutRoutineLines((text) => process.stderr.write(text));
