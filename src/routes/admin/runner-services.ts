import * as z from "zod";
import { dbOf } from "../../db/connect";
import type { Db } from "../../db/client";
import { badRequest, conflict, notFound } from "../../lib/errors";
import { agentsStore } from "../../stores/agents";
import { jsonBody, noBody, validate } from "../../middleware/validate";
import { registerRunnerService } from "../../registry/register";
import { registryStore, toRunnerView, toServiceView } from "../../stores/registry";
import { router } from "../app-env";
import { EndpointSchema } from "../../resources/ids";
import { normalizeBaseUrl } from "../../lib/url";
import { maskUrl } from "../../resources/secrets";
import { runnerService } from "../../db/schema";
import { selectPage } from "../../stores/list-page";
import { AdminListQuery, listing } from "./list-page";
import { checkReadAsStored } from "./replace";
import { updatedAtOf } from "../../lib/updated-at";

const ServiceInput = z.strictObject({
  base_url: EndpointSchema,
  // Left out: the stored one is kept (a move, a re-registration); null: none, its runs go unsigned.
  secret: z.string().min(16, "secret must be at least 16 characters").max(512).nullable().optional(),
});

/**
 * PUT takes the body of POST; what GET answered can be sent back as it is: its read-only fields are ignored (its
 * masked `base_url` keeps the stored address, and a secret left out is kept), but for `updated_at`, which, when sent,
 * must still be the stored one (checkReadAsStored).
 */
const ServiceReplace = ServiceInput.extend({
  service_id: z.string().optional(),
  has_secret: z.boolean().optional(),
  author: z.string().optional(),
  name: z.string().optional(),
  version: z.string().optional(),
  last_error: z.string().optional(),
  fetched_at: z.string().optional(),
  updated_at: z.string().optional(),
  runners: z.array(z.string()).optional(),
});

/** A DELETE refused for the agents on a service names at most this many of them (and counts them all). */
const AGENTS_NAMED = 100;

async function existingService(db: Db, serviceId: string) {
  const service = await registryStore(db).getService(serviceId);
  if (!service) throw notFound(`runner service ${serviceId} not found`);
  return service;
}

export const runnerServicesRouter = router()
  .get("/", validate("query", AdminListQuery), (c) => {
    const db = dbOf(c.env);
    return listing(c, c.req.valid("query"), {
      kind: "runner-services",
      read: (page) => selectPage(db, runnerService, { time: runnerService.createdAt, id: runnerService.serviceId }, page),
      position: (row) => ({ time: row.createdAt, id: row.serviceId }),
      view: async (rows) => {
        const runnerIds = await registryStore(db).runnerIdsOfServices(rows.map((s) => s.serviceId));
        return rows.map((s) => toServiceView(s, runnerIds.get(s.serviceId) ?? []));
      },
    });
  })
  .get("/:serviceId", async (c) => {
    const db = dbOf(c.env);
    const service = await existingService(db, c.req.param("serviceId"));
    return c.json(toServiceView(service, await registryStore(db).runnerIdsOf(service.serviceId)));
  })
  // Only once no agent runs on it: its agents would be left with a runner that does not exist.
  .delete("/:serviceId", async (c) => {
    const db = dbOf(c.env);
    const store = registryStore(db);
    const service = await existingService(db, c.req.param("serviceId"));
    const { agentIds: agents, total } = await agentsStore(db).onService(service.serviceId, AGENTS_NAMED);
    const more = total > agents.length ? ` and ${total - agents.length} more` : "";
    if (total) throw conflict(`runner service ${service.serviceId} runs agents ${agents.join(", ")}${more}: delete them or move them to another runner first`, { agents, agent_count: total });
    await store.removeService(service.serviceId);
    return c.body(null, 204);
  })
  .post("/", jsonBody(ServiceInput), async (c) => {
    const body = c.get("body");
    const result = await registerRunnerService(dbOf(c.env), { ...body, base_url: normalizeBaseUrl(body.base_url) });
    return c.json(result, 201);
  })
  // Moved (a new address, e.g. another port or host) or given a new secret: its runners, agents and runs keep their ids.
  .put("/:serviceId", jsonBody(ServiceReplace), async (c) => {
    const db = dbOf(c.env);
    const service = await existingService(db, c.req.param("serviceId"));
    const { base_url, secret, service_id, updated_at } = c.get("body");
    if (service_id !== undefined && service_id !== service.serviceId) throw badRequest("service_id in the body differs from the path");
    // Before its manifest is fetched: a stale copy costs the service no call.
    checkReadAsStored(updated_at, updatedAtOf(service), `runner service ${service.serviceId}`);
    const input = { base_url, secret };
    // The address as the view shows it (query values, credential-like path segments masked) keeps the stored one: it
    // is the only one an operator can read back, and `********` must never replace a function key or a setting.
    const baseUrl = input.base_url === maskUrl(service.baseUrl) ? service.baseUrl : normalizeBaseUrl(input.base_url);
    // Saved only over the service as read here (its updated_at): one changed since is a 409, never undone.
    return c.json(await registerRunnerService(db, { ...input, base_url: baseUrl, serviceId: service.serviceId, readUpdatedAt: service.updatedAt }));
  })
  .post("/:serviceId/refresh", noBody(), async (c) => {
    const db = dbOf(c.env);
    const service = await existingService(db, c.req.param("serviceId"));
    return c.json(await registerRunnerService(db, { base_url: service.baseUrl, serviceId: service.serviceId, refresh: true }));
  });

export const runnersRouter = router().get("/", validate("query", AdminListQuery), (c) =>
  listing(c, c.req.valid("query"), {
    kind: "runners",
    read: (page) => registryStore(dbOf(c.env)).runnersPage(page),
    position: (row) => ({ time: 0, id: row.runnerId }),
    view: (rows) => rows.map(toRunnerView),
  }),
);
