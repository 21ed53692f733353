import { startEchoRunner } from "./runner";

// Run on its own: `npx tsx examples/echo-runner/main.ts` (PORT, RUNNER_SECRET).
const runner = await startEchoRunner({ port: Number(process.env.PORT ?? 8788), secret: process.env.RUNNER_SECRET });
console.log(`echo runner listening on ${runner.url}`);
