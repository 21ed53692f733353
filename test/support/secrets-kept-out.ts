import { expect } from "vitest";
import type { TestHost } from "./host";

/**
 * None of `secrets` (a credential as text, or a pattern for tokens made per request) in any body the host answered
 * (`answered`), any EventLog record, any stored raw payload or any line the Worker logged.
 */
export async function expectSecretsKeptOut(host: TestHost, answered: readonly string[], secrets: readonly (string | RegExp)[]): Promise<void> {
  const records = await host.query<{ row: string }>("SELECT data_json || metadata_json || COALESCE(input_json, '') AS row FROM event_log");
  const raws = await Promise.all((await host.r2Keys("raw/")).map(async (k) => new TextDecoder().decode((await host.r2Object(k))!)));
  // Something was sent and kept to look in.
  expect(records.length).toBeGreaterThan(0);
  for (const text of [...answered, ...records.map((r) => r.row), ...raws, host.logs()]) {
    for (const secret of secrets) {
      if (typeof secret === "string") expect(text).not.toContain(secret);
      else expect(text).not.toMatch(secret);
    }
  }
}
