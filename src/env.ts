import * as z from "zod";
import type { ConversationDO } from "../durable-objects/conversation";
import { ConfigError } from "./lib/config-error";
import { isSecretsKey } from "./lib/secret-box";
import { STATE_VALUE_MAX_BYTES } from "./protocol/results";

/** Bindings and vars the Worker and the Durable Object receive. */
export interface Env {
  CONVERSATIONS: DurableObjectNamespace<ConversationDO>;
  ARTIFACTS: R2Bucket;
  /** Local only: the embedded libSQL file served by the Node process hosting Miniflare. */
  LIBSQL?: Fetcher;
  /** Local only: the per-start token the LIBSQL listener requires. */
  LIBSQL_BINDING_TOKEN?: string;
  LIBSQL_URL?: string;
  LIBSQL_AUTH_TOKEN?: string;
  ADMIN_TOKEN?: string;
  SECRETS_KEY?: string;
  SECRETS_KEY_PREVIOUS?: string;
  PUBLIC_URL?: string;
  RUN_DEADLINE_MS?: string;
  RUN_WRITE_INTERVAL_MS?: string;
  RUNNER_MAX_LINE_BYTES?: string;
  RUNNER_MAX_STREAM_BYTES?: string;
  RUN_MAX_ARTIFACTS?: string;
  RUN_MAX_MESSAGES?: string;
  RUN_MAX_STATE_UPDATES?: string;
  RUN_MAX_RESULTS?: string;
  RUN_MAX_STORAGE_WRITES?: string;
  MAX_EVENT_BODY_BYTES?: string;
  MAX_API_BODY_BYTES?: string;
  MAX_API_CALLS_IN_FLIGHT?: string;
  HOST_VERSION?: string;
  INPUT_ATTACHMENT_MAX_BYTES?: string;
  INPUT_ATTACHMENT_FETCH_TIMEOUT_MS?: string;
  ARTIFACT_UPLOAD_MAX_BYTES?: string;
  ARTIFACT_UPLOAD_RUN_MAX_BYTES?: string;
  ARTIFACT_TTL_SECONDS?: string;
  RETENTION_DAYS?: string;
  RETENTION_BATCH_SIZE?: string;
  RETENTION_MAX_BATCHES?: string;
  TOOL_CALL_TIMEOUT_MS?: string;
  TOOL_RESULT_INLINE_MAX_BYTES?: string;
  RESOURCE_RESPONSE_MAX_BYTES?: string;
  MODEL_ATTEMPT_TIMEOUT_MS?: string;
  MODEL_STREAM_IDLE_TIMEOUT_MS?: string;
  RESOURCE_RESPONSE_BUDGET_BYTES?: string;
  STORAGE_MAX_VALUE_BYTES?: string;
  STATE_MAX_SCOPE_KEYS?: string;
  STATE_MAX_SCOPE_BYTES?: string;
  STORAGE_MAX_AREA_KEYS?: string;
  STORAGE_MAX_AREA_BYTES?: string;
  PLATFORM_API_TIMEOUT_MS?: string;
  DB_QUERY_TIMEOUT_MS?: string;
  BLOB_OP_TIMEOUT_MS?: string;
  DELIVERY_EDIT_INTERVAL_MS?: string;
  DELIVERY_MAX_PARTS?: string;
  DELIVERY_MAX_ATTEMPTS?: string;
  DELIVERY_RETRY_BASE_MS?: string;
  DELIVERY_MAX_RETRY_AFTER_MS?: string;
  DELIVERY_SETTLE_TIMEOUT_MS?: string;
  RUN_STREAM_KEEPALIVE_MS?: string;
  RUN_WATCHDOG_INTERVAL_MS?: string;
  ALBUM_WAIT_MS?: string;
  JOIN_WAIT_MS?: string;
  DB_RETRY_PAUSE_MS?: string;
  DB_WRITE_RETRY_PAUSES_MS?: string;
}

const MiB = 1024 * 1024;
const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback);

/** A run and its reply's settling must fit in one alarm invocation (15 min), with a margin for its writes. */
const RUN_WALL_TIME_MAX_MS = 13 * 60_000;
/**
 * A run's refused writes are retried past its deadline too (the write in flight then, and its end): the alarm keeps
 * about a minute past RUN_DEADLINE_MS + DELIVERY_SETTLE_TIMEOUT_MS (ALARM_BUDGET_MS, 14 of its 15 minutes), so two
 * such writes' pauses must fit in it with their round trips.
 */
const WRITE_RETRY_PAUSES_MAX_TOTAL_MS = 20_000;

const ConfigFields = z.object({
  // Visible ASCII only: a bearer ends at its first space, and a header carries no other text as sent, so such a token could never be presented.
  // Unset, the operator has skipped a step of README "Production": say which (zod's own message is "expected string").
  ADMIN_TOKEN: z
    .string({ error: (iss) => (iss.input === undefined ? "not set: npx wrangler secret put ADMIN_TOKEN (under wrangler dev, in .dev.vars)" : undefined) })
    .min(16, "ADMIN_TOKEN must be at least 16 characters")
    .regex(/^[\x21-\x7E]+$/, "ADMIN_TOKEN must be printable ASCII without spaces (it is sent as `Authorization: Bearer <token>`)"),
  /** Seals stored credentials (lib/secret-box.ts); unset, they are stored as given. */
  SECRETS_KEY: z.string().refine(isSecretsKey, "SECRETS_KEY must be 32 random bytes in base64 (openssl rand -base64 32)").optional(),
  /** During a key rotation: the key values may still be sealed under, until `POST /v1/admin/secrets/reseal` has run. */
  SECRETS_KEY_PREVIOUS: z.string().refine(isSecretsKey, "SECRETS_KEY_PREVIOUS must be 32 bytes in base64").optional(),
  // Without a trailing slash: paths are appended to it.
  // An http(s) origin: runners and platforms call it (`localhost:8787`, typed without a scheme, parses as a URL of scheme "localhost:").
  PUBLIC_URL: z.url({ protocol: /^https?$/, error: "PUBLIC_URL must be an http(s) URL such as https://agents.example.com" }).transform((url) => url.replace(/\/+$/, "")).optional(),
  RUN_DEADLINE_MS: positiveInt(300_000),
  /** A run's results are written at most once per this long (held meanwhile, up to RUNNER_MAX_LINE_BYTES): each write is a subrequest in production. 0 writes each read at once. */
  RUN_WRITE_INTERVAL_MS: z.coerce.number().int().nonnegative().max(10_000, "RUN_WRITE_INTERVAL_MS must be at most 10000").default(250),
  RUNNER_MAX_LINE_BYTES: positiveInt(MiB),
  RUNNER_MAX_STREAM_BYTES: positiveInt(32 * MiB),
  /** `artifact.created` results one run may have accepted (inline or by reference); past it each is dropped, so what a run holds of them stays bounded. */
  RUN_MAX_ARTIFACTS: positiveInt(1000),
  /**
   * Messages one run may have accepted (`message.completed`, and the one `run.completed` adds): each is a transcript row every later history.page pages
   * through and a chat delivery, so one more fails the run (runner.too_many_messages) rather than flooding its conversation.
   */
  RUN_MAX_MESSAGES: positiveInt(1000),
  /**
   * State writes one run may make, `state.updated` results and `state.set` calls together: one more result fails the
   * run (runner.too_many_state_updates), one more call is refused (429, not retryable).
   */
  RUN_MAX_STATE_UPDATES: positiveInt(1000),
  /**
   * Result lines one run may send, duplicates included: each writes a ledger row or two, so one more fails the run
   * (runner.too_many_results) rather than the stream's byte limit alone bounding its rows (~270k of the shortest lines);
   * a model streaming 300 tokens a second for the whole 300 s deadline sends 90k deltas.
   */
  RUN_MAX_RESULTS: positiveInt(100_000),
  /** `storage.set` calls one run may make: each keeps up to STORAGE_MAX_VALUE_BYTES past the run; one more is refused (429, not retryable). */
  RUN_MAX_STORAGE_WRITES: positiveInt(1000),
  MAX_EVENT_BODY_BYTES: positiveInt(MiB),
  MAX_API_BODY_BYTES: positiveInt(2 * MiB),
  /** Host API calls one run may have in flight; more are refused 429, so a runner cannot make its conversation's object hold a body and an upstream answer for each of thousands. */
  MAX_API_CALLS_IN_FLIGHT: positiveInt(16),
  HOST_VERSION: z.string().default("0.1.0"),
  /** Largest input attachment (decoded base64 or fetched URL body). */
  INPUT_ATTACHMENT_MAX_BYTES: positiveInt(10 * MiB),
  INPUT_ATTACHMENT_FETCH_TIMEOUT_MS: positiveInt(10_000),
  ARTIFACT_UPLOAD_MAX_BYTES: positiveInt(100 * MiB),
  /** Declared bytes of all the uploads one run may start: every accepted one counts, even if its body then breaks. */
  ARTIFACT_UPLOAD_RUN_MAX_BYTES: positiveInt(500 * MiB),
  /** Lifetime of artifacts the host stores (inputs, uploads, runner output); 0 keeps them forever. */
  // At most 100 years, as RETENTION_DAYS: an expiry further out is none (and past Date's range, no timestamp at all); 0 is never.
  ARTIFACT_TTL_SECONDS: z.coerce.number().int().nonnegative().max(36_500 * 24 * 3600, "ARTIFACT_TTL_SECONDS must be at most 3153600000 (100 years); 0 keeps artifacts forever").default(30 * 24 * 3600),
  /** EventLog and Transcript rows older than this are deleted by the cron job; unset keeps them forever. */
  // At least a day: deleting an EventLog row forgets its event id, and platforms redeliver for hours (Lark ~7 h).
  // At most a century: a cutoff further back is no cutoff (and past Number's range, none at all).
  RETENTION_DAYS: z.coerce.number().min(1).max(36_500, "RETENTION_DAYS must be at most 36500; unset keeps rows forever").optional(),
  /** Rows (or artifacts) deleted per statement, and statements per table per cron invocation. */
  // Bounded so a statement's parameters (one per payload of a batch) stay far below SQLite's limit.
  RETENTION_BATCH_SIZE: positiveInt(500).refine((n) => n <= 5_000, "RETENTION_BATCH_SIZE must be at most 5000"),
  RETENTION_MAX_BATCHES: positiveInt(20),
  // Host-held resources (models, tools, knowledge bases):
  TOOL_CALL_TIMEOUT_MS: positiveInt(30_000),
  /** A tool result larger than this (serialised) is stored as an artifact and returned by reference. */
  TOOL_RESULT_INLINE_MAX_BYTES: positiveInt(64 * 1024),
  /** Largest body read from a provider, tool or retrieval endpoint. */
  RESOURCE_RESPONSE_MAX_BYTES: positiveInt(16 * MiB),
  /**
   * Upstream answers (bodies being read, and what is made of them until the call is answered) held at once by
   * one isolate's calls, all runs together: a call whose answer would take more is refused (429), so a few calls
   * reading large answers cannot exhaust the 128 MB a Durable Object has. At least RESOURCE_RESPONSE_MAX_BYTES.
   */
  RESOURCE_RESPONSE_BUDGET_BYTES: positiveInt(24 * MiB),
  /**
   * One attempt at a model provider (or a retrieval endpoint) must answer within this long: the whole
   * answer, or for a stream its first event. Past it the attempt is a provider fault and the next
   * fallback model is tried.
   */
  MODEL_ATTEMPT_TIMEOUT_MS: positiveInt(60_000),
  /** A model stream the provider sends nothing on (not even a keep-alive) for this long is ended with an error line. */
  MODEL_STREAM_IDLE_TIMEOUT_MS: positiveInt(60_000),
  /** Largest storage.set value, decoded bytes (its base64 must also fit in MAX_API_BODY_BYTES). */
  STORAGE_MAX_VALUE_BYTES: positiveInt(MiB),
  /**
   * What one state scope keeps across runs, whoever writes it (an actor's or the runner scope is shared by an agent's
   * runs in every conversation): keys, and UTF-8 bytes of their values. Past either, a write of a new key or of a
   * larger value is refused (413) or, as a `state.updated` result, dropped; overwriting with a value no larger and
   * deleting always work. 10,000 keys is far more than a session, its checkpoints and a note per fact need; the key
   * cap alone would let a scope hold 2.5 GiB (values are up to 256 KiB), so its bytes are capped too: 64 MiB, 256
   * values of the largest size or 10,000 of 6.5 KiB, while a run's context carries at most 1 MiB of it.
   */
  STATE_MAX_SCOPE_KEYS: positiveInt(10_000),
  STATE_MAX_SCOPE_BYTES: positiveInt(64 * MiB),
  /**
   * What one storage area keeps (a runner service's `plugin` area, shared by all its agents and workspaces; a
   * workspace's): keys, and decoded bytes of their values (each value's base64 padding, up to 2 bytes, counted too:
   * stores/data-caps.ts). Storage is for blobs (up to STORAGE_MAX_VALUE_BYTES each),
   * so the bytes are the bound that matters: 256 MiB, 256 values of the largest size; 10,000 keys keeps a listing's
   * pages and a runner's key space bounded. Past either, a write is refused (413), as for state.
   */
  STORAGE_MAX_AREA_KEYS: positiveInt(10_000),
  STORAGE_MAX_AREA_BYTES: positiveInt(256 * MiB),
  /** Each call to a chat platform's API (send, edit, file lookup) gives up after this long. */
  PLATFORM_API_TIMEOUT_MS: positiveInt(10_000),
  /**
   * One libSQL round trip (a query or a batch): a database that hangs fails the call instead of holding a run or an
   * alarm. At most a minute: a run's last writes and a reply's records are bounded by it past the run's deadline and
   * settle window, in the alarm's last minutes.
   */
  DB_QUERY_TIMEOUT_MS: positiveInt(15_000).refine((n) => n <= 60_000, "DB_QUERY_TIMEOUT_MS must be at most 60000"),
  /**
   * One R2 call (a head, get, put, delete or listing of the ARTIFACTS bucket, a body read whole), and each chunk of a body
   * streamed to or from it: R2 that hangs fails the call instead of holding a run's end, the next run, an ingress answer
   * or a sweep. At most a minute, as DB_QUERY_TIMEOUT_MS: a run's end waits it for the blobs it removes, in the alarm's
   * last minutes.
   */
  BLOB_OP_TIMEOUT_MS: positiveInt(10_000).refine((n) => n <= 60_000, "BLOB_OP_TIMEOUT_MS must be at most 60000"),
  /** Streaming replies: at least this long between two edits of one message. */
  DELIVERY_EDIT_INTERVAL_MS: positiveInt(1_000),
  /** Most messages one reply's text takes in a chat (the last of them then says the rest was cut); at least 2. */
  DELIVERY_MAX_PARTS: positiveInt(20).refine((n) => n >= 2, "DELIVERY_MAX_PARTS must be at least 2"),
  /** Tries per delivery call (send or edit), the first included. */
  DELIVERY_MAX_ATTEMPTS: positiveInt(4),
  /** Backoff before the n-th retry of a failed call: base * 2^(n-1), when the platform named no wait. */
  DELIVERY_RETRY_BASE_MS: positiveInt(500),
  /** A rate limit asking to wait longer than this is a failure, not a wait. */
  DELIVERY_MAX_RETRY_AFTER_MS: positiveInt(60_000),
  /** After a run ends, how long its conversation's object keeps delivering the reply; within the alarm's 15-minute wall time. */
  DELIVERY_SETTLE_TIMEOUT_MS: positiveInt(60_000),
  /** A run's SSE stream (`GET /v1/runs/{id}/stream`) sends a comment after this long without a frame. */
  RUN_STREAM_KEEPALIVE_MS: positiveInt(15_000),
  /** While a conversation has runs, its alarm looks again at least this often: runs an instance lost (a restart) end this soon. */
  RUN_WATCHDOG_INTERVAL_MS: positiveInt(10_000),
  /** How long the run of a Telegram album's first item waits for the next item (and again after each); 0 runs every item on its own. */
  ALBUM_WAIT_MS: z.coerce.number().int().nonnegative().max(10_000, "ALBUM_WAIT_MS must be at most 10000").default(1_500),
  /** How long the welcome run of a Slack member's join waits for the joins that come with it (and again after each); 0 welcomes each on its own. */
  JOIN_WAIT_MS: z.coerce.number().int().nonnegative().max(10_000, "JOIN_WAIT_MS must be at most 10000").default(2_000),
  /** How long the conversation object waits before trying again what the database could not take: a run's start, a lost run's end, steered messages to decide anew. */
  DB_RETRY_PAUSE_MS: positiveInt(5_000).refine((n) => n <= 60_000, "DB_RETRY_PAUSE_MS must be at most 60000"),
  /**
   * The pauses after which a run's write the database refused (busy, away for a moment; not a constraint) is tried
   * again, comma-separated: one try more per pause, then the run gives up on it. A reply's delivery records wait them
   * too (src/delivery/records.ts), within the reply's flush bound.
   */
  DB_WRITE_RETRY_PAUSES_MS: z
    .string()
    .default("200,1000,3000")
    .transform((list) => list.split(",").map((p) => p.trim()).filter(Boolean).map(Number))
    .pipe(
      z
        .array(z.number().int().nonnegative().max(10_000, "each pause must be at most 10000"))
        // Commas alone would mean no retry at all: a typo more likely than a choice (unset, the default applies).
        .min(1, "DB_WRITE_RETRY_PAUSES_MS must list at least one pause in ms, comma-separated (200,1000,3000 when unset)")
        .max(10, "at most 10 pauses")
        .refine((pauses) => pauses.reduce((sum, p) => sum + p, 0) <= WRITE_RETRY_PAUSES_MAX_TOTAL_MS, {
          message: `DB_WRITE_RETRY_PAUSES_MS must add up to at most ${WRITE_RETRY_PAUSES_MAX_TOTAL_MS} ms: a run's last writes wait them out past its deadline, within its alarm's wall time`,
        }),
    ),
});

/** The Worker's configuration variables (what wrangler.toml [vars] and secrets may set). */
export const CONFIG_VARS = Object.keys(ConfigFields.shape) as (keyof typeof ConfigFields.shape)[];

const ConfigSchema = ConfigFields.refine((c) => c.RUN_DEADLINE_MS + c.DELIVERY_SETTLE_TIMEOUT_MS <= RUN_WALL_TIME_MAX_MS, {
  message: `RUN_DEADLINE_MS + DELIVERY_SETTLE_TIMEOUT_MS must stay within ${RUN_WALL_TIME_MAX_MS / 60_000} minutes: a run lives in a Durable Object alarm, which has 15 minutes of wall time`,
})
  .refine((c) => c.RESOURCE_RESPONSE_BUDGET_BYTES >= c.RESOURCE_RESPONSE_MAX_BYTES, {
    path: ["RESOURCE_RESPONSE_BUDGET_BYTES"],
    message: "RESOURCE_RESPONSE_BUDGET_BYTES must be at least RESOURCE_RESPONSE_MAX_BYTES: an answer as large as allowed must fit in it",
  })
  // A cap below one value of the largest size would refuse values every other check lets through.
  .refine((c) => c.STATE_MAX_SCOPE_BYTES >= STATE_VALUE_MAX_BYTES, {
    path: ["STATE_MAX_SCOPE_BYTES"],
    message: `STATE_MAX_SCOPE_BYTES must be at least ${STATE_VALUE_MAX_BYTES} (a state value's largest size): a scope must hold one value as large as allowed`,
  })
  .refine((c) => c.STORAGE_MAX_AREA_BYTES >= c.STORAGE_MAX_VALUE_BYTES + 2, {
    path: ["STORAGE_MAX_AREA_BYTES"],
    message: "STORAGE_MAX_AREA_BYTES must be at least STORAGE_MAX_VALUE_BYTES + 2: an area must hold one value as large as allowed, counted with its base64 padding",
  })
  // The wrong variable removed at the end of a rotation: every sealed credential would fail, and new ones be stored in the clear.
  .refine((c) => c.SECRETS_KEY_PREVIOUS === undefined || c.SECRETS_KEY !== undefined, {
    path: ["SECRETS_KEY"],
    message: "SECRETS_KEY_PREVIOUS is set without SECRETS_KEY: set SECRETS_KEY to the current key (SECRETS_KEY_PREVIOUS is only for the key being rotated out)",
  });

export type Config = z.infer<typeof ConfigSchema>;

const cache = new WeakMap<object, Config>();

/** A variable set to a blank string (`X=` in a .dev.vars file, `X = ""` in wrangler.toml) is unset: its default applies. */
function withoutBlanks(vars: object): Record<string, unknown> {
  return Object.fromEntries(Object.entries(vars).filter(([, v]) => !(typeof v === "string" && v.trim() === "")));
}

const issueLine = (issue: z.core.$ZodIssue) => `${issue.path.join(".") || "config"}: ${issue.message}`;

/** What is wrong with a set of variables, one line each (none when they make a valid configuration). */
export function configProblems(vars: Record<string, unknown>): string[] {
  const parsed = ConfigSchema.safeParse(withoutBlanks(vars));
  return parsed.success ? [] : parsed.error.issues.map(issueLine);
}

/** What is wrong with where the database is: nothing when the local binding or LIBSQL_URL names one. */
export function databaseProblems(env: Env): string[] {
  if (env.LIBSQL || env.LIBSQL_URL?.trim()) return [];
  return ["LIBSQL_URL: not set: npx wrangler secret put LIBSQL_URL (libsql://<db>.turso.io or https://<sqld host>), with LIBSQL_AUTH_TOKEN; locally, npm start brings its own database"];
}

/** Parse the environment once per isolate; a misconfiguration fails loudly, naming every problem (ConfigError). */
export function configOf(env: Env): Config {
  let config = cache.get(env);
  if (!config) {
    const parsed = ConfigSchema.safeParse(withoutBlanks(env));
    // The database's setting too: an operator who skipped several secrets learns of all of them at once.
    if (!parsed.success) throw new ConfigError([...parsed.error.issues.map(issueLine), ...databaseProblems(env)]);
    config = parsed.data;
    cache.set(env, config);
  }
  return config;
}
