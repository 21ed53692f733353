import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 30_000,
    // expect.poll waits for what the Worker does in its own time (a log line, a write, a hang-up): 1 s by default, which
    // a loaded machine can take; a poll that passes returns as soon as it does, so a wide bound costs nothing.
    expect: { poll: { timeout: 10_000 } },
    hookTimeout: 60_000,
    // Each integration file runs its own workerd. Most of a file's time is waiting (on its runners, platforms,
    // timeouts): two at a time kept one of two cores busy; three finish the suite in about three quarters of the
    // time. Four made CPU-heavy files several times slower.
    maxWorkers: 3,
    // Files share their worker's module cache: Miniflare and the test support are imported once per worker, not once
    // per file (about a third of the suite's time). No test file stubs globals or mocks modules; each starts its own
    // host, runners and fake platforms, and module state in test support is only counters and helpers.
    isolate: false,
  },
});
