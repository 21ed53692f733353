import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ROOT } from "../../local/build";

/**
 * README "Two commands": without SECRETS_KEY, npm start seals stored credentials with a key it keeps in the data folder.
 * An operator who later sets a SECRETS_KEY of their own on that folder must not find every credential it stored
 * unopenable (a bot's webhook a 500): the folder's key opens them until a reseal moves them under the new one. One who
 * leaves their own key unset on a folder that used it is told so.
 */
const dataDir = mkdtempSync(join(tmpdir(), "npm-start-secrets-key-"));
const editedDir = mkdtempSync(join(tmpdir(), "npm-start-secrets-key-edited-"));
const children: ChildProcess[] = [];
afterAll(() => {
  // npm start's own process group: its workerd too, should a stop have failed.
  for (const c of children) if (c.exitCode === null && c.signalCode === null) try { process.kill(-c.pid!, "SIGKILL"); } catch { /* gone */ }
  for (const dir of [dataDir, editedDir]) rmSync(dir, { recursive: true, force: true });
});

/** npm start's script on the shared folder, in a process group of its own; `ready` once it prints its URL and token. */
function start(env: Record<string, string>, dir = dataDir) {
  const base = { ...process.env };
  delete base.SECRETS_KEY;
  delete base.SECRETS_KEY_PREVIOUS;
  delete base.ADMIN_TOKEN;
  const child = spawn(process.execPath, ["--import", "tsx", "local/start.ts"], { cwd: ROOT, detached: true, env: { ...base, DATA_DIR: dir, PORT: "0", RUNNER_PORT: "0", ...env } });
  children.push(child);
  let output = "";
  child.stdout!.on("data", (c) => (output += c));
  child.stderr!.on("data", (c) => (output += c));
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  const ready = async () => {
    for (;;) {
      const m = /listening on (\S+)\nadmin token: (\S+)/.exec(output);
      if (m) return { url: m[1]!, token: m[2]! };
      if (child.exitCode !== null) throw new Error(`npm start exited: ${output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const stop = async () => {
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  };
  return { ready, stop, output: () => output };
}

const admin = async (h: { url: string; token: string }, method: string, path: string, body?: unknown) => {
  const res = await fetch(`${h.url}${path}`, { method, headers: { authorization: `Bearer ${h.token}` }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

const SECRET_TOKEN = "npm-start-secret-token-0123456789";
/** An update the host records and answers without calling Telegram: only its secret token must open. */
const webhook = (h: { url: string }) =>
  fetch(`${h.url}/v1/webhooks/telegram/tg-kept`, { method: "POST", headers: { "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: JSON.stringify({ update_id: 7 }) }).then((r) => r.status);

describe("npm start's SECRETS_KEY across starts on one data folder", () => {
  it("a SECRETS_KEY set on a folder that ran on its own key opens what that key sealed, and says to reseal; unset again, it says what it made", async () => {
    const first = start({});
    const h1 = await first.ready();
    const bot = await admin(h1, "POST", "/v1/admin/bots", {
      bot_id: "tg-kept",
      platform: "telegram",
      api_base_url: "http://127.0.0.1:9",
      credentials: { bot_token: "123456:kept-across-starts-token", secret_token: SECRET_TOKEN },
    });
    expect(bot.status).toBe(201);
    expect(await webhook(h1)).toBe(200);
    await first.stop();

    const second = start({ SECRETS_KEY: randomBytes(32).toString("base64") });
    const h2 = await second.ready();
    expect(second.output()).toContain(`npm start: SECRETS_KEY is not the key in ${join(dataDir, "secrets-key")}`);
    // The bot's credentials, sealed under the folder's key, still open: its webhook is verified, not a 500.
    expect(await webhook(h2)).toBe(200);
    const resealed = await admin(h2, "POST", "/v1/admin/secrets/reseal");
    expect(resealed.status).toBe(200);
    expect(resealed.body).toMatchObject({ resealed: { bots: 1 }, failed: { bots: 0, runner_services: 0 } });
    await second.stop();

    // As the notice says: the file deleted once resealed. A start without the operator's key now makes another.
    rmSync(join(dataDir, "secrets-key"));
    const third = start({});
    const h3 = await third.ready();
    expect(third.output()).toMatch(/^npm start: SECRETS_KEY is unset and .*secrets-key held no key, so a new key was made there/m);
    expect(await webhook(h3)).toBe(500);
    await third.stop();
  }, 120_000);

  it("a key file that holds no key (edited by hand) is not offered as SECRETS_KEY_PREVIOUS: npm start with the operator's SECRETS_KEY starts", async () => {
    // It can have sealed nothing: a start on it alone is refused (SECRETS_KEY must be 32 bytes).
    writeFileSync(join(editedDir, "secrets-key"), "my own key, see the wiki\n");
    const started = start({ SECRETS_KEY: randomBytes(32).toString("base64") }, editedDir);
    const h = await started.ready();
    expect(started.output()).not.toContain("SECRETS_KEY_PREVIOUS");
    expect((await admin(h, "GET", "/v1/admin/bots")).status).toBe(200);
    await started.stop();
  }, 90_000);
});
