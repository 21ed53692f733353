/**
 * One line of a run's result stream read as an AgentRunResult (PROTOCOL §7), or the protocol error that fails the run,
 * and its data as the run's ledger keeps it.
 */
import { AgentRunResultSchema, type AgentRunResult } from "../protocol/results";
import { formatZodIssues, jsonShapeProblem, MAX_JSON_DEPTH } from "../protocol/common";
import { RunnerCallError } from "../runner/errors";
import { headOf } from "../lib/text";
import { holdsUnsafeNumber, mayHoldRoundedInteger, parseKeepingIntegers } from "../lib/exact-json";
import { quotedAsSent, type QuoteScrub } from "./sent-secrets";
import { parserWords } from "./parser-words";

/** Characters of a line that is not JSON its protocol error quotes: its start. */
const LINE_SHOWN_CHARS = 80;
/** Characters of the run id a line named that its protocol error quotes (a run's own id is far shorter). */
const RUN_ID_SHOWN_CHARS = 200;

/**
 * A result's data as its ledger entry keeps it, "as sent": a whole number JSON parsing rounds (a Python int, a 64-bit
 * id in telemetry, or in a result dropped for holding it) keeps its digits. The host acts on `parsed`, the plain parse,
 * whose checks find such a number in the line's text (roundedIntegerAt).
 */
export function ledgerDataOf(payload: string, parsed: unknown): unknown {
  if (!mayHoldRoundedInteger(payload) || !holdsUnsafeNumber(parsed)) return parsed;
  const exact = (parseKeepingIntegers(payload) as { data?: unknown }).data;
  return exact === undefined ? parsed : exact;
}

/**
 * The line as an AgentRunResult of run `runId`, or the protocol error that fails the run. What the error quotes of
 * the line goes through `scrub` first (a debug print of the run's secrets: ./sent-secrets.ts).
 */
export function parseResultLine(payload: string, runId: string, scrub: QuoteScrub = quotedAsSent): AgentRunResult {
  let json: unknown;
  try {
    json = JSON.parse(payload);
  } catch (err) {
    // The parser's words name where it stopped (a NaN deep in the line, say), which the line's start may not show. Only
    // what is quoted is scrubbed (a line may be a megabyte): the parser's window, and the line's first characters.
    const words = headOf(parserWords(err, scrub), 200);
    throw new RunnerCallError("runner.protocol_error", `result line is not JSON (${words}): ${scrub(payload, { max: LINE_SHOWN_CHARS })}`);
  }
  const envelope = AgentRunResultSchema.safeParse(json);
  if (!envelope.success) throw new RunnerCallError("runner.protocol_error", `result line is not an AgentRunResult: ${formatZodIssues(envelope.error)}`);
  const result = envelope.data;
  // Kept "as sent" in the ledger (loose telemetry, unknown types): never deeper than any JSON the host accepts elsewhere.
  // Depth only: a "__proto__" member is the payload's own problem, which drops that one result (./results.ts), not the run.
  const shape = jsonShapeProblem(result.data, MAX_JSON_DEPTH + 1, { depthOnly: true });
  if (shape) throw new RunnerCallError("runner.protocol_error", `result data: ${shape}`);
  if (result.run_id !== runId) {
    throw new RunnerCallError("runner.protocol_error", `result names run ${scrub(result.run_id, { max: RUN_ID_SHOWN_CHARS })}, not this run`);
  }
  return result;
}
