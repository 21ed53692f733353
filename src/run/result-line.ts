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
  } catch {
    // The parser's words name where it stopped (a NaN deep in the line, say), which the line's start may not show; they
    // quote the line around that place, so they are the words for the line as quoted.
    const quoted = scrub(payload);
    throw new RunnerCallError("runner.protocol_error", `result line is not JSON (${headOf(parserWords(quoted), 200)}): ${headOf(quoted, 80)}`);
  }
  const envelope = AgentRunResultSchema.safeParse(json);
  if (!envelope.success) throw new RunnerCallError("runner.protocol_error", `result line is not an AgentRunResult: ${formatZodIssues(envelope.error)}`);
  const result = envelope.data;
  // Kept "as sent" in the ledger (loose telemetry, unknown types): never deeper than any JSON the host accepts elsewhere.
  // Depth only: a "__proto__" member is the payload's own problem, which drops that one result (./results.ts), not the run.
  const shape = jsonShapeProblem(result.data, MAX_JSON_DEPTH + 1, { depthOnly: true });
  if (shape) throw new RunnerCallError("runner.protocol_error", `result data: ${shape}`);
  if (result.run_id !== runId) {
    throw new RunnerCallError("runner.protocol_error", `result names run ${scrub(result.run_id)}, not this run`);
  }
  return result;
}

/** Why JSON.parse refuses `text`, in its own words. Scrubbed text that parses (a secret held the fault) says no more than that. */
function parserWords(text: string): string {
  try {
    JSON.parse(text);
    return "not valid JSON";
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}
