import { z } from "zod";
import { dbOf } from "../../db/connect";
import { notFound } from "../../lib/errors";
import { jsonBody } from "../../middleware/validate";
import { registerRunnerService } from "../../registry/register";
import { registryStore, toRunnerView } from "../../stores/registry";
import { router } from "../app-env";

const ServiceInput = z.strictObject({
  base_url: z.url({ protocol: /^https?$/ }),
  secret: z.string().min(16, "secret must be at least 16 characters").max(512).optional(),
});

export const runnerServicesRouter = router()
  .post("/", jsonBody(ServiceInput), async (c) => {
    const result = await registerRunnerService(dbOf(c.env), c.get("body"));
    return c.json(result, 201);
  })
  // Moved (a new address, e.g. another port or host) or given a new secret: its runners, agents and runs keep their ids.
  .put("/:serviceId", jsonBody(ServiceInput), async (c) => {
    const db = dbOf(c.env);
    const service = await registryStore(db).getService(c.req.param("serviceId"));
    if (!service) throw notFound(`runner service ${c.req.param("serviceId")} not found`);
    return c.json(await registerRunnerService(db, { ...c.get("body"), serviceId: service.serviceId }));
  })
  .post("/:serviceId/refresh", async (c) => {
    const db = dbOf(c.env);
    const service = await registryStore(db).getService(c.req.param("serviceId"));
    if (!service) throw notFound(`runner service ${c.req.param("serviceId")} not found`);
    return c.json(await registerRunnerService(db, { base_url: service.baseUrl, serviceId: service.serviceId }));
  });

export const runnersRouter = router().get("/", async (c) => {
  const rows = await registryStore(dbOf(c.env)).listRunners();
  return c.json({ items: rows.map(toRunnerView) });
});
