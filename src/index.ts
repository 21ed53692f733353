import { createApp } from "./app";
import type { Env } from "./env";
import { runRetention } from "./retention/run";
import { describeError } from "./lib/describe-error";
import { escapedLine } from "./lib/log-text";

export { ConversationDO } from "../durable-objects/conversation";

const app = createApp();

export default {
  fetch: (request, env, ctx) => app.fetch(request, env, ctx),
  // Cron trigger (wrangler.toml [triggers]): retention. Awaited, not waitUntil: a cron invocation may run for minutes.
  async scheduled(controller, env) {
    const summary = await runRetention(env, controller.scheduledTime).catch((err: unknown) => {
      // Said here, as every other failure is: Miniflare (npm start) prints nothing of a cron's exception, and the
      // platform would print the raw one, a failed query's bound values included. Thrown again, so the cron fails.
      // Escaped as one line, not cut: it names every step that failed, and why.
      const why = `retention failed: ${escapedLine(describeError(err))}`;
      console.error(why);
      throw new Error(why);
    });
    console.log(`retention: ${JSON.stringify(summary)}`);
  },
} satisfies ExportedHandler<Env>;
