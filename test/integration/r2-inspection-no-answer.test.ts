import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NoAnswerError } from "../../local/answered-within";
import type { LocalHost } from "../../local/host";
import { startHostOn } from "../support/host";

const BOUND_MS = 1_500;

/** This process's child processes named `workerd`. */
function workerdChildren(): Set<number> {
  const children = readdirSync("/proc/self/task").flatMap((task) => readFileSync(`/proc/self/task/${task}/children`, "utf8").split(" ").filter(Boolean).map(Number));
  return new Set(children.filter((pid) => readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "workerd"));
}

let dir: string;
let host: LocalHost;
let workerd: number;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "agent-host-test-"));
  const before = workerdChildren();
  host = await startHostOn(dir, {}, { inspectionTimeoutMs: BOUND_MS });
  const started = [...workerdChildren()].filter((pid) => !before.has(pid));
  expect(started).toHaveLength(1);
  workerd = started[0];
});
afterAll(async () => {
  await host?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

describe("an R2 inspection of a workerd that stopped answering", () => {
  it("fails within its bound, saying workerd did not answer, instead of waiting for the test's timeout", async () => {
    await host.r2Put("seen", "bytes");
    // Miniflare makes a method's first call synchronously; the calls a test waits on after that are asynchronous.
    expect(Buffer.from((await host.r2Object("seen"))!).toString()).toBe("bytes");
    // Stopped, workerd reads nothing and answers nothing, as its spinning event loop did.
    process.kill(workerd, "SIGSTOP");
    let refusal: unknown;
    const asked = Date.now();
    try {
      refusal = await host.r2Object("seen").catch((err: unknown) => err);
    } finally {
      process.kill(workerd, "SIGCONT");
    }
    expect(Date.now() - asked).toBeLessThan(BOUND_MS + 2_000);
    expect(refusal).toBeInstanceOf(NoAnswerError);
    expect((refusal as NoAnswerError).message).toContain(`R2 read of seen: workerd did not answer in ${BOUND_MS} ms`);
    // Let go, workerd answers the read after all: it ends before the host is stopped (its last step needs workerd).
    await (refusal as NoAnswerError).pending;
  }, 15_000);
});
