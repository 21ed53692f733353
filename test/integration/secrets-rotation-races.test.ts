import { createHmac } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../../local/build";
import { startHost, type LocalHost } from "../../local/host";
import { adminCall } from "../../local/setup";
import { ADMIN_TOKEN, messageEvent, type RunView } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README "Credentials at rest", to rotate: set SECRETS_KEY_PREVIOUS to the current key, SECRETS_KEY to the new one,
 * "call reseal until it answers all zeros, then remove SECRETS_KEY_PREVIOUS". A refresh of a runner service that
 * lands around the reseal must not put the secret back under the key being rotated out.
 */
const KEY_A = Buffer.alloc(32, 0x1a).toString("base64");
const KEY_B = Buffer.alloc(32, 0x2b).toString("base64");
const RUNNER_SECRET = "refresh-race-runner-secret-77";

let dataDir: string;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

async function withHost<T>(vars: Record<string, string>, use: (host: LocalHost) => Promise<T>, dir = dataDir): Promise<T> {
  const host = await startHost({ adminToken: ADMIN_TOKEN, dataDir: dir, scriptPath: join(ROOT, "dist/test/worker.js"), vars });
  try {
    return await use(host);
  } finally {
    await host.dispose();
  }
}
async function runOnce(host: LocalHost, conversation: string) {
  const posted = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent(conversation, "hi"));
  for (const end = Date.now() + 10_000; ; await new Promise((r) => setTimeout(r, 25))) {
    const res = await adminCall<RunView>(host, "GET", `/v1/runs/${posted.body.run_id}`);
    if (!["created", "running"].includes(res.body.status)) return res.body;
    if (Date.now() > end) throw new Error("run did not end");
  }
}
const reseal = (host: LocalHost) => adminCall<{ resealed: Record<string, number>; failed: Record<string, number> }>(host, "POST", "/v1/admin/secrets/reseal");

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "agent-host-refresh-race-"));
  runner = await startAdHocRunner({
    name: "refresh-race",
    onRun: ({ body, headers, raw }, res) => {
      const signed = headers["x-agent-signature"] === `v1=${createHmac("sha256", RUNNER_SECRET).update(`${headers["x-agent-timestamp"]}.${raw}`).digest("hex")}`;
      resultWriter(res, body.context.run_id).reply(signed ? "signed" : "unsigned");
    },
  });
});
afterAll(async () => {
  await runner?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe("a key rotation racing writes that keep a stored secret", () => {
  it("after reseal has answered all zeros, the runner service secret is under the new key", async () => {
    let serviceId = "";
    await withHost({ SECRETS_KEY: KEY_A }, async (host) => {
      const reg = await adminCall<any>(host, "POST", "/v1/admin/runner-services", { base_url: runner.url, secret: RUNNER_SECRET });
      expect(reg.status).toBe(201);
      serviceId = reg.body.service.service_id;
      expect((await adminCall(host, "POST", "/v1/admin/agents", { agent_id: "rr", name: "rr", runner_id: runner.runnerId(), event_types: ["message.received"] })).status).toBe(201);
      expect(await runOnce(host, "a")).toMatchObject({ status: "completed", message: { content: "signed" } });
    });

    await withHost({ SECRETS_KEY: KEY_B, SECRETS_KEY_PREVIOUS: KEY_A }, async (host) => {
      // The refresh's write (it carries the manifest) is held a moment, as a slow database would, while the operator reseals.
      (host as any).databaseOutage({ delayMs: 1500, matching: "refresh-race" });
      const refreshing = adminCall(host, "POST", `/v1/admin/runner-services/${serviceId}/refresh`);
      await new Promise((r) => setTimeout(r, 400));
      expect((await reseal(host)).body.resealed.runner_services).toBe(1);
      expect((await reseal(host)).body.resealed.runner_services).toBe(0);
      expect((await refreshing).status).toBe(200);
      // The procedure's "all zeros" was answered before the refresh landed: the operator now removes SECRETS_KEY_PREVIOUS.
    });

    // SECRETS_KEY_PREVIOUS removed, as the README says to.
    await withHost({ SECRETS_KEY: KEY_B }, async (host) => {
      expect(await runOnce(host, "b")).toMatchObject({ status: "completed", message: { content: "signed" } });
    });
  });

  it("an agent saved as GET showed it around the reseal keeps its secret under the new key", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agent-host-put-race-"));
    const AGENT_KEY = "agent-put-race-key-4411";
    const echo = await startAdHocRunner({
      name: "put-race",
      runners: [{ name: "default", label: { en_US: "r" }, config_schema: [{ name: "api_key", type: "secret", label: { en_US: "Key" } }] }],
      onRun: ({ body }, res) => resultWriter(res, body.context.run_id).reply(JSON.stringify(body.context.config)),
    });
    try {
      await withHost(
        { SECRETS_KEY: KEY_A },
        async (host) => {
          expect((await adminCall(host, "POST", "/v1/admin/runner-services", { base_url: echo.url })).status).toBe(201);
          expect((await adminCall(host, "POST", "/v1/admin/agents", { agent_id: "pr", name: "pr", runner_id: echo.runnerId(), runner_config: { api_key: AGENT_KEY }, event_types: ["message.received"] })).status).toBe(201);
        },
        dir,
      );
      await withHost(
        { SECRETS_KEY: KEY_B, SECRETS_KEY_PREVIOUS: KEY_A },
        async (host) => {
          // The operator renames the agent, sending back what GET showed (its secret masked); its write is held a moment.
          const shown = (await adminCall<any>(host, "GET", "/v1/admin/agents/pr")).body;
          (host as any).databaseOutage({ delayMs: 1500, matching: "pr-renamed-8c1f" });
          const putting = adminCall(host, "PUT", "/v1/admin/agents/pr", { ...shown, name: "pr-renamed-8c1f" });
          await new Promise((r) => setTimeout(r, 400));
          expect((await reseal(host)).body.resealed.agents).toBe(1);
          expect((await reseal(host)).body.resealed.agents).toBe(0);
          // Written over the row as read only: the reseal changed it meanwhile, so the PUT is a 409 and undoes nothing.
          expect((await putting).status).toBe(409);
        },
        dir,
      );
      await withHost(
        { SECRETS_KEY: KEY_B },
        async (host) => {
          expect(await runOnce(host, "c")).toMatchObject({ status: "completed", message: { content: JSON.stringify({ api_key: AGENT_KEY }) } });
        },
        dir,
      );
    } finally {
      await echo.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
