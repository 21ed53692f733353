import { createClient } from "@libsql/client";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalHost } from "../../local/host";
import { adminCall } from "../../local/setup";
import { stateScopeKey } from "../../src/stores/state";
import { callHostApi } from "../support/host-api";
import { messageEvent, startHostOn, waitForRunOn } from "../support/host";
import { databaseBefore } from "../support/old-release-db";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * A database the release before migration 0027 left, its state and storage already written: the migration counts
 * what is there, so the caps (STATE_MAX_SCOPE_KEYS, STORAGE_MAX_AREA_KEYS and their bytes) hold from the first write
 * after the upgrade, and the usage rows are exact from then on.
 */
const AGENT = "upgraded-agent";
const WORKSPACE = "ws-up";
const EPOCH = "epoch_up";
const STATE_ROWS = [["a", '"one"'], ["b", "[1,2,3]"], ["c", '"é"']] as const;
const STORAGE_ROWS = [["x", Buffer.from("12345").toString("base64")], ["y", Buffer.from("1").toString("base64")]] as const;
/** A storage value as its area counts it: three bytes per four base64 characters (its padding counted). */
const counted = (b64: string) => (b64.length / 4) * 3;

let dir: string;
let host: LocalHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
/** What the run's Host API calls got, by name. */
let answers: Record<string, { status: number; body: any }> = {};
/** The actor scope the old release wrote (the run's claim seeds a conversation scope of its own). */
let actorScope: string;

async function seedOldRelease(path: string) {
  const db = createClient({ url: `file:${path}` });
  const run = (sql: string, args: unknown[] = []) => db.execute({ sql, args: args as never });
  const manifest = (await (await fetch(`${runner.url}/manifest`)).json()) as { runners: unknown[] };
  const then = Date.now() - 86_400_000;
  await run("INSERT INTO runner_service (service_id, base_url, author, name, version, manifest_json, fetched_at, created_at) VALUES ('svc_up', ?, 'tests', 'upgraded-data', '0.0.1', ?, ?, ?)", [runner.url, JSON.stringify(manifest), then, then]);
  await run("INSERT INTO runner (runner_id, service_id, name, manifest_json, updated_at) VALUES (?, 'svc_up', 'default', ?, ?)", [runner.runnerId(), JSON.stringify(manifest.runners[0]), then]);
  await run(
    `INSERT INTO agent (agent_id, name, runner_id, runner_config_json, event_types_json, scope_type, scope_id, resource_policy_json, state_policy_json, delivery_policy_json, concurrency_json, enabled, state_epoch, created_at, updated_at)
     VALUES (?, 'up', ?, '{}', '["message.received"]', 'workspace', ?, '{"allow":{"storage":["workspace"]}}', '{"enable_state":true,"state_scopes":["conversation","actor"]}', '{"streaming":true,"failure_notice":"Sorry.","format":"markdown"}', '{}', 1, ?, ?, ?)`,
    [AGENT, runner.runnerId(), WORKSPACE, EPOCH, then, then],
  );
  await run("INSERT INTO agent_binding (scope_type, scope_id, event_type, agent_id) VALUES ('workspace', ?, 'message.received', ?)", [WORKSPACE, AGENT]);
  actorScope = (await stateScopeKey("actor", { runnerId: runner.runnerId(), agentId: AGENT, stateEpoch: EPOCH, workspaceId: WORKSPACE, actorType: "user", actorId: "u1" }))!;
  for (const [key, json] of STATE_ROWS) {
    await run("INSERT INTO runner_state (scope_key, key, runner_id, scope, value_json, updated_at, agent_id, agent_epoch) VALUES (?, ?, ?, 'actor', ?, ?, ?, ?)", [actorScope, key, runner.runnerId(), json, then, AGENT, EPOCH]);
  }
  for (const [key, b64] of STORAGE_ROWS) await run("INSERT INTO storage (area, owner_key, key, value_base64, updated_at) VALUES ('workspace', ?, ?, ?, ?)", [WORKSPACE, key, b64, then]);
  db.close();
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "upgrade-0027-"));
  runner = await startAdHocRunner({
    name: "upgraded-data",
    runners: [{ name: "default", label: { en_US: "upgraded" }, capabilities: {}, permissions: { storage: ["workspace"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const api = (action: string, params: Record<string, unknown>) => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, action, params);
      answers = {
        stateNew: await api("state.set", { scope: "actor", key: "d", value: 1 }),
        stateOverwrite: await api("state.set", { scope: "actor", key: "b", value: [3, 2, 1] }),
        storageNew: await api("storage.set", { area: "workspace", key: "z", value_base64: "AA==" }),
        storageOverwrite: await api("storage.set", { area: "workspace", key: "x", value_base64: "AA==" }),
      };
      resultWriter(res, ctx.run_id).reply("done");
    },
  });
  mkdirSync(join(dir, "migrations"));
  await databaseBefore("0027_runner_data_usage", join(dir, "host.db"), join(dir, "migrations"));
  await seedOldRelease(join(dir, "host.db"));
  host = await startHostOn(dir, { STATE_MAX_SCOPE_KEYS: String(STATE_ROWS.length), STORAGE_MAX_AREA_KEYS: String(STORAGE_ROWS.length) });
}, 60_000);

afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("migration 0027 on a database holding state and storage", () => {
  it("counts the rows already there: a scope or area they fill refuses a new key at once, and overwrites go through", async () => {
    const posted = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent("up-conv", "hello", { workspace_id: WORKSPACE }));
    expect((await waitForRunOn(host, posted.body.run_id)).status).toBe("completed");
    const stateBytes = STATE_ROWS.reduce((n, [, json]) => n + Buffer.byteLength(json), 0);
    expect(answers.stateNew.body.error).toMatchObject({ code: "payload_too_large", details: { setting: "STATE_MAX_SCOPE_KEYS", keys: STATE_ROWS.length, bytes: stateBytes } });
    const storageBytes = STORAGE_ROWS.reduce((n, [, b64]) => n + counted(b64), 0);
    expect(answers.storageNew.body.error).toMatchObject({ code: "payload_too_large", details: { setting: "STORAGE_MAX_AREA_KEYS", keys: STORAGE_ROWS.length, bytes: storageBytes } });
    expect([answers.stateOverwrite.status, answers.storageOverwrite.status]).toEqual([200, 200]);
    // The usage rows follow the overwrites: "[3,2,1]" is as long as "[1,2,3]", "AA==" replaced x's value.
    const usage = await host.query<{ keys: number; bytes: number }>("SELECT keys, bytes FROM runner_state_usage WHERE scope_key = ? UNION ALL SELECT keys, bytes FROM storage_usage", [actorScope]);
    expect(usage.map((r) => [Number(r.keys), Number(r.bytes)])).toEqual([
      [STATE_ROWS.length, stateBytes],
      [STORAGE_ROWS.length, storageBytes - counted(STORAGE_ROWS[0][1]) + counted("AA==")],
    ]);
  });
});
