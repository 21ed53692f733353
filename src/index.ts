import { createApp } from "./app";
import type { Env } from "./env";

export { ConversationDO } from "../durable-objects/conversation";

const app = createApp();

export default {
  fetch: (request, env, ctx) => app.fetch(request, env, ctx),
} satisfies ExportedHandler<Env>;
