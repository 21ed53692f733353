import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { CONFIG_VARS, configOf, configProblems, type Env } from "../../src/env";
import { COMPATIBILITY_DATE, COMPATIBILITY_FLAGS } from "../../local/host";

const TOKEN = "an-admin-token-of-24-chars";

describe("configuration", () => {
  it("says what is wrong, one line per variable, and nothing for a valid set", () => {
    expect(configProblems({ ADMIN_TOKEN: TOKEN })).toEqual([]);
    expect(configProblems({ ADMIN_TOKEN: "short", RUN_DEADLINE_MS: "-1" })).toEqual([
      "ADMIN_TOKEN: ADMIN_TOKEN must be at least 16 characters",
      expect.stringMatching(/^RUN_DEADLINE_MS: /),
    ]);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, RUN_DEADLINE_MS: String(13 * 60_000) })).toEqual([expect.stringMatching(/must stay within 13 minutes/)]);
  });

  it("lists the Worker's variables, and keeps PUBLIC_URL without a trailing slash", () => {
    expect(CONFIG_VARS).toEqual(expect.arrayContaining(["ADMIN_TOKEN", "RUN_DEADLINE_MS", "RETENTION_DAYS", "PUBLIC_URL", "DB_QUERY_TIMEOUT_MS"]));
    // Only the variables the config reads matter here: the bindings are not parsed.
    const env = { ADMIN_TOKEN: TOKEN, PUBLIC_URL: "https://agents.example.com//" } as unknown as Env;
    expect(configOf(env).PUBLIC_URL).toBe("https://agents.example.com");
  });

  it("takes a blank variable as unset, so its default applies", () => {
    const env = { ADMIN_TOKEN: TOKEN, ARTIFACT_TTL_SECONDS: "", RETENTION_DAYS: " ", RUN_DEADLINE_MS: "" } as unknown as Env;
    expect(configProblems(env as unknown as Record<string, unknown>)).toEqual([]);
    const config = configOf(env);
    expect([config.ARTIFACT_TTL_SECONDS, config.RETENTION_DAYS, config.RUN_DEADLINE_MS]).toEqual([30 * 24 * 3600, undefined, 300_000]);
  });

  it("reads the database retry pauses: a comma-separated list of write retries, and one pause before the object tries again", () => {
    const config = (vars: Record<string, string>) => configOf({ ADMIN_TOKEN: TOKEN, ...vars } as unknown as Env);
    expect([config({}).DB_WRITE_RETRY_PAUSES_MS, config({}).DB_RETRY_PAUSE_MS]).toEqual([[200, 1_000, 3_000], 5_000]);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, DB_QUERY_TIMEOUT_MS: "60000" })).toEqual([]);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, DB_QUERY_TIMEOUT_MS: "60001" })).toEqual(["DB_QUERY_TIMEOUT_MS: DB_QUERY_TIMEOUT_MS must be at most 60000"]);
    // R2 calls have a bound of their own, as long as a query's at most.
    expect(config({}).BLOB_OP_TIMEOUT_MS).toBe(10_000);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, BLOB_OP_TIMEOUT_MS: "60000" })).toEqual([]);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, BLOB_OP_TIMEOUT_MS: "60001" })).toEqual(["BLOB_OP_TIMEOUT_MS: BLOB_OP_TIMEOUT_MS must be at most 60000"]);
    expect(config({ DB_WRITE_RETRY_PAUSES_MS: " 50, 100 ,", DB_RETRY_PAUSE_MS: "250" })).toMatchObject({ DB_WRITE_RETRY_PAUSES_MS: [50, 100], DB_RETRY_PAUSE_MS: 250 });
    expect(configProblems({ ADMIN_TOKEN: TOKEN, DB_WRITE_RETRY_PAUSES_MS: "200,soon" })).toEqual([expect.stringMatching(/^DB_WRITE_RETRY_PAUSES_MS\.1: /)]);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, DB_WRITE_RETRY_PAUSES_MS: "20000" })).toEqual([expect.stringMatching(/^DB_WRITE_RETRY_PAUSES_MS\.0: each pause must be at most 10000/)]);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, DB_WRITE_RETRY_PAUSES_MS: Array(11).fill("1").join(",") })).toEqual([expect.stringMatching(/at most 10 pauses/)]);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, DB_RETRY_PAUSE_MS: "0" })).toEqual([expect.stringMatching(/^DB_RETRY_PAUSE_MS: /)]);
  });

  it("refuses a write retry list that names no pause, or whose pauses outlast the margin a run's alarm keeps past its deadline", () => {
    // Commas alone are no list (a blank value is unset: its default applies).
    for (const commas of [",", " , ,"]) expect(configProblems({ ADMIN_TOKEN: TOKEN, DB_WRITE_RETRY_PAUSES_MS: commas })).toEqual([expect.stringMatching(/^DB_WRITE_RETRY_PAUSES_MS: .*at least one pause/)]);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, DB_WRITE_RETRY_PAUSES_MS: "" })).toEqual([]);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, DB_WRITE_RETRY_PAUSES_MS: "-5" })).toEqual([expect.stringMatching(/^DB_WRITE_RETRY_PAUSES_MS\.0: /)]);
    // Each within its own bound, together past 20 s: a run's last writes would wait them out past its alarm's wall time.
    expect(configProblems({ ADMIN_TOKEN: TOKEN, DB_WRITE_RETRY_PAUSES_MS: "10000,10000,1" })).toEqual([expect.stringMatching(/^DB_WRITE_RETRY_PAUSES_MS: .*add up to at most 20000/)]);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, DB_WRITE_RETRY_PAUSES_MS: "10000,10000" })).toEqual([]);
    expect(configOf({ ADMIN_TOKEN: TOKEN, DB_WRITE_RETRY_PAUSES_MS: "0" } as unknown as Env).DB_WRITE_RETRY_PAUSES_MS).toEqual([0]);
  });

  it("bounds the retention settings: a cutoff past any date, or a batch past SQLite's parameter limit, is refused", () => {
    expect(configProblems({ ADMIN_TOKEN: TOKEN, RETENTION_DAYS: "1e301" })).toEqual([expect.stringMatching(/^RETENTION_DAYS: .*at most 36500/)]);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, RETENTION_DAYS: "36500", RETENTION_BATCH_SIZE: "5000" })).toEqual([]);
    // An artifact expiry past Date's range would make every artifact's metadata unreadable.
    expect(configProblems({ ADMIN_TOKEN: TOKEN, ARTIFACT_TTL_SECONDS: "10000000000000" })).toEqual([expect.stringMatching(/^ARTIFACT_TTL_SECONDS: .*at most 3153600000/)]);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, ARTIFACT_TTL_SECONDS: String(36_500 * 24 * 3600) })).toEqual([]);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, RETENTION_BATCH_SIZE: "40000" })).toEqual([expect.stringMatching(/^RETENTION_BATCH_SIZE: .*at most 5000/)]);
  });
});

describe("upstream answers", () => {
  it("refuses a budget of answers held at once smaller than one answer may be, naming what to set", () => {
    expect(configProblems({ ADMIN_TOKEN: TOKEN, RESOURCE_RESPONSE_MAX_BYTES: String(32 * 1024 * 1024) })).toEqual([
      expect.stringMatching(/^RESOURCE_RESPONSE_BUDGET_BYTES: .*at least RESOURCE_RESPONSE_MAX_BYTES/),
    ]);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, RESOURCE_RESPONSE_MAX_BYTES: "65536", RESOURCE_RESPONSE_BUDGET_BYTES: "65536" })).toEqual([]);
  });
});

describe("what runners keep across runs", () => {
  it("refuses a scope or area capped below one value of the largest size, naming what to set", () => {
    expect(configProblems({ ADMIN_TOKEN: TOKEN, STATE_MAX_SCOPE_BYTES: String(256 * 1024 - 1), STORAGE_MAX_AREA_BYTES: "1024" })).toEqual([
      expect.stringMatching(/^STATE_MAX_SCOPE_BYTES: .*at least 262144/),
      expect.stringMatching(/^STORAGE_MAX_AREA_BYTES: .*at least STORAGE_MAX_VALUE_BYTES \+ 2/),
    ]);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, STATE_MAX_SCOPE_BYTES: String(256 * 1024), STORAGE_MAX_VALUE_BYTES: "1024", STORAGE_MAX_AREA_BYTES: "1026" })).toEqual([]);
  });
});

describe("secrets key rotation", () => {
  it("refuses SECRETS_KEY_PREVIOUS without SECRETS_KEY, naming what to set", () => {
    const key = Buffer.alloc(32, 7).toString("base64");
    expect(configProblems({ ADMIN_TOKEN: TOKEN, SECRETS_KEY_PREVIOUS: key })).toEqual([expect.stringMatching(/^SECRETS_KEY: SECRETS_KEY_PREVIOUS is set without SECRETS_KEY/)]);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, SECRETS_KEY: key, SECRETS_KEY_PREVIOUS: Buffer.alloc(32, 9).toString("base64") })).toEqual([]);
  });
});

describe("runtime", () => {
  it("runs locally on the compatibility date and flags production deploys with (wrangler.toml)", () => {
    const toml = readFileSync(new URL("../../wrangler.toml", import.meta.url), "utf8");
    expect(toml.match(/^compatibility_date = "([^"]+)"$/m)?.[1]).toBe(COMPATIBILITY_DATE);
    expect(JSON.parse(toml.match(/^compatibility_flags = (\[.*\])$/m)?.[1] ?? "null")).toEqual(COMPATIBILITY_FLAGS);
  });
});
