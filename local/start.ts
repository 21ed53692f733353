/**
 * `npm start`: the host on its embedded default, with nothing to configure.
 * PORT (default 8787), ADMIN_TOKEN (default: a dev token kept in .data/),
 * SECRETS_KEY (default: a key kept in .data/), DATA_DIR (default .data),
 * RUNNER_PORT (default 8788); any other Worker variable of src/env.ts
 * (RUN_DEADLINE_MS, RETENTION_DAYS, PUBLIC_URL, ...) is passed through.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { startEchoRunner } from "../examples/echo-runner/runner";
import { CONFIG_VARS, configProblems } from "../src/env";
import { ROOT } from "./build";
import { DataDirLockedError, lockDataDir } from "./data-lock";
import { ScheduledOutcomeError, startHost } from "./host";
import { localSecretsKeys } from "./secrets-key";
import { bindRunner } from "./setup";

const dataDir = process.env.DATA_DIR || join(ROOT, ".data");
// An empty variable (a blank line of a .env template) counts as unset.
const setVar = (name: string) => process.env[name]?.trim() || undefined;
const passedVars: Record<string, string> = {};
for (const name of CONFIG_VARS) if (name !== "ADMIN_TOKEN" && name !== "SECRETS_KEY" && setVar(name)) passedVars[name] = setVar(name)!;
// Checked before anything is made (the data folder, its dev token and key): a bad value is one clear line, not a
// failure deep inside the first request, and leaves no folder behind. What npm start makes itself is valid by
// construction: a 48-character dev token, a 32-byte key; stand-ins of those shapes are checked in their place.
const problems = configProblems({ ADMIN_TOKEN: setVar("ADMIN_TOKEN") ?? "0".repeat(48), SECRETS_KEY: setVar("SECRETS_KEY") ?? Buffer.alloc(32).toString("base64"), ...passedVars });
if (problems.length) {
  console.error(`npm start: the configuration is not valid:\n${problems.map((p) => `  ${p}`).join("\n")}`);
  process.exit(1);
}
let dataLock: { release(): void };
try {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  dataLock = lockDataDir(dataDir);
} catch (err) {
  const why = err instanceof DataDirLockedError ? err.message : `DATA_DIR=${dataDir} cannot be used as the data folder (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); set DATA_DIR to a folder this user can write`;
  console.error(`npm start: ${why}`);
  process.exit(1);
}
// Ctrl-C or SIGTERM while starting: the start completes (the example bound, nothing half made), then stops in order.
// One handler for the whole life of the process: while a signal has no listener Node restores its default (killed at
// once), and a signal caught by a listener removed before its turn in the event loop is lost.
let stopRequested = false;
let shutdown: (() => Promise<void>) | undefined;
// `npm start` passes on the signal it gets, which a terminal's Ctrl-C (or a supervisor signalling the whole group) also
// sent here: one stop asked for twice within moments. Only a signal later than this after the first (a second Ctrl-C)
// is a new one, which stops at once.
const SAME_STOP_MS = 1000;
let firstStopSignalAt: number | undefined;
const onStopSignal = () => {
  const now = Date.now();
  if (firstStopSignalAt !== undefined && now - firstStopSignalAt < SAME_STOP_MS) return;
  firstStopSignalAt ??= now;
  if (shutdown) void shutdown();
  else stopRequested = true;
};
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, onStopSignal);

function devSecret(name: string): string {
  const file = join(dataDir, name);
  if (!existsSync(file)) writeFileSync(file, randomBytes(24).toString("hex"), { mode: 0o600 });
  return readFileSync(file, "utf8").trim();
}

// Blank (spaces included) counts as unset, as for every other variable.
const ownAdminToken = setVar("ADMIN_TOKEN");
const adminToken = ownAdminToken || devSecret("admin-token");
// Stored credentials are sealed with it: losing the folder's key file makes them unreadable (register them again).
const { notice: secretsKeyNotice, ...secretsKeys } = localSecretsKeys(dataDir, process.env);
const vars: Record<string, string> = { ...secretsKeys, ...passedVars };
// The check above took stand-ins for the folder's own token and key, files a hand may have edited: checked now as read,
// each problem naming its file (the operator set neither variable), as a host started on them answers every request
// 503. A key file that holds no key sealed nothing (no host ran on it), so deleting it loses nothing.
const ownSecretsKey = setVar("SECRETS_KEY");
const folderFile: Record<string, string | undefined> = {
  ADMIN_TOKEN: ownAdminToken ? undefined : `the token in ${join(dataDir, "admin-token")}`,
  SECRETS_KEY: ownSecretsKey ? undefined : `the key in ${join(dataDir, "secrets-key")}, which sealed nothing`,
};
const folderProblems = configProblems({ ADMIN_TOKEN: adminToken, ...vars }).map((problem) => {
  const file = folderFile[problem.slice(0, problem.indexOf(":"))];
  return file ? `${problem} (${file}: correct it, or delete it and a new one is made)` : problem;
});
if (folderProblems.length) {
  console.error(`npm start: the configuration is not valid:\n${folderProblems.map((p) => `  ${p}`).join("\n")}`);
  process.exit(1);
}
if (secretsKeyNotice) console.error(secretsKeyNotice);
/** A port from the environment, checked to be one and free, so a conflict is one clear line rather than a stack trace. */
async function freePort(name: string, fallback: number): Promise<number> {
  const port = Number(process.env[name]?.trim() || fallback);
  const fail = (why: string) => {
    console.error(`npm start: ${name}=${process.env[name] ?? fallback} ${why}; set ${name} to another port`);
    process.exit(1);
  };
  if (!Number.isInteger(port) || port < 0 || port > 65535) fail("is not a port (0 to 65535, 0 for any free one)");
  await new Promise<void>((resolve) => {
    const probe = createServer()
      .once("error", (err: NodeJS.ErrnoException) => fail(err.code === "EADDRINUSE" ? "is in use (another npm start?)" : `cannot be used (${err.code})`))
      .listen(port, "127.0.0.1", () => probe.close(() => resolve()));
  });
  return port;
}

const runnerPort = await freePort("RUNNER_PORT", 8788);
const hostPort = await freePort("PORT", 8787);
// Each was free on its own; the runner takes its port first, so one given twice would fail the host deep inside.
if (hostPort !== 0 && hostPort === runnerPort) {
  console.error(`npm start: PORT and RUNNER_PORT are both ${hostPort}; set one of them to another port`);
  process.exit(1);
}
const runnerSecret = devSecret("runner-secret");
const runner = await startEchoRunner({ port: runnerPort, secret: runnerSecret });
// A first start (no database yet) binds the example until it has: one stopped before (a terminal's Ctrl-C stops workerd
// too) is still a first start the next time, not an operator who deleted the agent.
const bindingPending = join(dataDir, "example-binding-pending");
if (!existsSync(join(dataDir, "host.db"))) writeFileSync(bindingPending, "");
const host = await startHost({ adminToken, port: hostPort, dataDir, vars, ownSignals: true });
// The example agent is bound the first time only; one the operator's own configuration refuses is one line, not a crash.
const keepExisting = !existsSync(bindingPending);
const example = await bindRunner(host, { baseUrl: runner.url, secret: runnerSecret, runnerId: "http:examples/echo/default", agentId: "echo", keepExisting }).then(
  (bound) => (rmSync(bindingPending, { force: true }), bound ? `bound globally as agent "echo"` : `agent "echo" as you left it`),
  (err: Error) => `not bound: ${err.message}`,
);

// The dev token it made is printed; the operator's own (ADMIN_TOKEN) is theirs already, and kept out of scrollback.
const shownToken = ownAdminToken ? "$ADMIN_TOKEN" : adminToken;
console.log(`agent host listening on ${host.url}
admin token: ${ownAdminToken ? "from ADMIN_TOKEN" : adminToken}
example runner: ${runner.url} (http:examples/echo/default, ${example})

try:
  curl -s -X POST ${host.url}/v1/events -H "Authorization: Bearer ${shownToken}" -H "content-type: application/json" \\
    -d '{"event_type":"message.received","conversation_id":"c1","actor":{"actor_type":"user","actor_id":"u1"},"input":{"text":"hello"}}'
  curl -s ${host.url}/v1/runs/RUN_ID -H "Authorization: Bearer ${shownToken}"
  curl -sN ${host.url}/v1/runs/RUN_ID/stream -H "Authorization: Bearer ${shownToken}"`);

// Miniflare does not fire cron triggers: run retention at start and hourly, as wrangler.toml's cron does in production.
let stopping = false;
// A sweep cut short by a stop is not a failure worth a line; nor is one whose handler threw: the Worker said why.
const sweep = () =>
  host.triggerScheduled().catch((err) => stopping || (err instanceof ScheduledOutcomeError && err.outcome === "exception") || console.error(`retention failed: ${(err as Error).message}`));
void sweep();
const retention = setInterval(sweep, 3600_000);

shutdown = async () => {
  // A second stop signal (see onStopSignal) during the orderly stop stops at once.
  if (stopping) process.exit(1);
  stopping = true;
  clearInterval(retention);
  // Bounded: a stop asked for is never left hanging on a stuck dispose.
  setTimeout(() => process.exit(1), 10_000).unref();
  await host.dispose();
  await runner.close();
  dataLock.release();
  process.exit(0);
};
// Miniflare's own handlers kill workerd and exit at once (128 + signal): the orderly stop replaces them.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  for (const listener of process.listeners(signal)) if (listener !== onStopSignal) process.off(signal, listener);
}
if (stopRequested) void shutdown();
