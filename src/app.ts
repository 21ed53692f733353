import { Hono } from "hono";
import { adminAuth } from "./middleware/admin-auth";
import { limitBody } from "./middleware/body-limit";
import { onError } from "./middleware/on-error";
import { notFoundOrNotAllowed } from "./middleware/not-found";
import type { AppEnv } from "./routes/app-env";
import { agentsRouter } from "./routes/admin/agents";
import { knowledgeBasesRouter } from "./routes/admin/knowledge-bases";
import { mcpServersRouter } from "./routes/admin/mcp-servers";
import { modelsRouter } from "./routes/admin/models";
import { toolsRouter } from "./routes/admin/tools";
import { botsRouter } from "./routes/admin/bots";
import { adminEventsRouter } from "./routes/admin/events";
import { secretsRouter } from "./routes/admin/secrets";
import { runnerServicesRouter, runnersRouter } from "./routes/admin/runner-services";
import { conversationsRouter } from "./routes/conversations";
import { eventsRouter } from "./routes/events";
import { runsRouter } from "./routes/runs";
import { webhooksRouter } from "./routes/webhooks";
import { readiness } from "./routes/readiness";

/** Admin writes are small JSON documents; a larger body is refused before it is held. */
const ADMIN_BODY_MAX_BYTES = 1024 * 1024;

export function createApp() {
  const app = new Hono<AppEnv>();
  app.get("/healthz", (c) => c.json({ ok: true }));
  app.get("/readyz", readiness);
  app.route("/v1/events", eventsRouter);
  app.route("/v1/runs", runsRouter);
  app.route("/v1/conversations", conversationsRouter);
  app.use("/v1/admin/*", adminAuth(), limitBody(ADMIN_BODY_MAX_BYTES));
  app.route("/v1/admin/runner-services", runnerServicesRouter);
  app.route("/v1/admin/runners", runnersRouter);
  app.route("/v1/admin/agents", agentsRouter);
  app.route("/v1/admin/models", modelsRouter);
  app.route("/v1/admin/tools", toolsRouter);
  app.route("/v1/admin/mcp-servers", mcpServersRouter);
  app.route("/v1/admin/knowledge-bases", knowledgeBasesRouter);
  app.route("/v1/admin/bots", botsRouter);
  app.route("/v1/admin/secrets", secretsRouter);
  app.route("/v1/admin/events", adminEventsRouter);
  app.route("/v1/webhooks", webhooksRouter);
  app.onError(onError);
  app.notFound(notFoundOrNotAllowed(() => app.routes));
  return app;
}
