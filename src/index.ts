import { createApp } from "./app";
import type { Env } from "./env";
import { runRetention } from "./retention/run";

export { ConversationDO } from "../durable-objects/conversation";

const app = createApp();

export default {
  fetch: (request, env, ctx) => app.fetch(request, env, ctx),
  // Cron trigger (wrangler.toml [triggers]): retention. Awaited, not waitUntil: a cron invocation may run for minutes.
  async scheduled(controller, env) {
    const summary = await runRetention(env, controller.scheduledTime);
    console.log(`retention: ${JSON.stringify(summary)}`);
  },
} satisfies ExportedHandler<Env>;
