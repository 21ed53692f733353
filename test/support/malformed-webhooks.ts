/**
 * Driving a bot's webhook with payloads a platform could sign but should never send (fields null or of the wrong type,
 * hostile text, nesting, unusable ids), and reading what the host made of each: the answer, the EventLog rows it
 * recorded with a raw payload, and what the Worker logged meanwhile.
 */
import { createHmac } from "node:crypto";
import { expect } from "vitest";
import type { TestHost } from "./host";

/** JSON text nested `depth` arrays deep: written as text, as no recursive JSON.stringify of a built value could. */
export const nestedJson = (depth: number) => "[".repeat(depth) + "]".repeat(depth);

/** The headers Slack signs a request with: v0 HMAC-SHA256 over the timestamp and the body as sent. */
export function slackSignature(signingSecret: string, body: string | Buffer, at = Date.now()): Record<string, string> {
  const ts = String(Math.floor(at / 1000));
  const mac = createHmac("sha256", signingSecret).update(`v0:${ts}:`).update(body).digest("hex");
  return { "x-slack-request-timestamp": ts, "x-slack-signature": `v0=${mac}` };
}

export interface IngressRow {
  event_id: string;
  event_type: string;
  source_event_type: string | null;
  conversation_id: string | null;
  raw_ref: string | null;
}

export interface Delivered {
  status: number;
  text: string;
  /** The EventLog rows the request recorded from the platform (those naming a raw payload), in order. */
  recorded: IngressRow[];
  /** What the Worker printed while the request was served (the host must be started with `captureLogs`). */
  logs: string;
}

/** One request to a bot's webhook, and what came of it. */
export async function deliver(host: TestHost, botId: string, send: () => Promise<Response>): Promise<Delivered> {
  const [{ seq }] = await host.query<{ seq: number | null }>("SELECT max(seq) AS seq FROM event_log");
  const logsBefore = host.logs().length;
  const res = await send();
  const text = await res.text();
  const recorded = await host.query<IngressRow>(
    "SELECT event_id, event_type, source_event_type, conversation_id, raw_ref FROM event_log WHERE seq > ? AND bot_id = ? AND raw_ref IS NOT NULL ORDER BY seq",
    [seq ?? 0, botId],
  );
  return { status: res.status, text, recorded, logs: host.logs().slice(logsBefore) };
}

/** The stored payload of a recorded event as an operator reads it (GET /v1/admin/events/{id}/raw). */
export async function storedPayload(host: TestHost, eventId: string): Promise<unknown> {
  const res = await fetch(`${host.url}/v1/admin/events/${encodeURIComponent(eventId)}/raw`, { headers: { authorization: `Bearer ${host.adminToken}` } });
  expect(res.status, `raw payload of ${eventId}`).toBe(200);
  return res.json();
}

/** A request the host answered as it should: never a 500, nothing unhandled in its log, no credential in the answer. */
export function expectHandled(d: Delivered, secrets: readonly string[]): void {
  expect(d.status, d.text).not.toBe(500);
  expect(d.logs).not.toMatch(/unhandled error|Uncaught|Maximum call stack|URI malformed/);
  expect(secrets.filter((s) => d.text.includes(s))).toEqual([]);
}

/** A payload acknowledged 200 and recorded with its raw payload, readable by the operator. */
export async function expectRecorded(host: TestHost, d: Delivered): Promise<IngressRow> {
  expect(d.status, d.text).toBe(200);
  expect(d.recorded.length, "recorded events").toBeGreaterThan(0);
  await storedPayload(host, d.recorded[0].event_id);
  return d.recorded[0];
}

/** A payload of a platform's table, and what the host should make of it. */
export interface MalformedRow {
  name: string;
  body: () => string;
  /** Refused so, unrecorded; otherwise acknowledged 200 and recorded. */
  refused?: { status: number; code: string };
  /** What it is recorded as (event_type, source_event_type), when that is the point. */
  as?: [string, string];
}

/** The refusal of a verified body that cannot be read as JSON (or nests too deep). */
export const INVALID_JSON = { status: 400, code: "invalid_json" } as const;

/**
 * Each row sent to the bot's webhook (`send`): never a 500, then refused as the row says, or recorded with its payload
 * readable by the operator, equal to `stored(body, row)` (undefined: not compared); `check` for a platform's own points.
 */
export async function expectEachHandled<R extends MalformedRow>(
  host: TestHost,
  botId: string,
  rows: readonly R[],
  o: { send: (body: string, row: R) => () => Promise<Response>; secrets: readonly string[]; stored: (body: string, row: R) => unknown; check?: (row: R, recorded: IngressRow) => void },
): Promise<void> {
  for (const row of rows) {
    const body = row.body();
    const d = await deliver(host, botId, o.send(body, row));
    expectHandled(d, o.secrets);
    if (row.refused) {
      expect({ row: row.name, status: d.status, code: JSON.parse(d.text).error.code, recorded: d.recorded.length }).toEqual({ row: row.name, ...row.refused, recorded: 0 });
      continue;
    }
    const recorded = await expectRecorded(host, d);
    if (row.as) expect({ row: row.name, as: [recorded.event_type, recorded.source_event_type] }).toEqual({ row: row.name, as: row.as });
    o.check?.(row, recorded);
    const stored = o.stored(body, row);
    if (stored !== undefined) expect(await storedPayload(host, recorded.event_id), row.name).toEqual(stored);
  }
}
