import * as z from "zod";
import { dbOf } from "../../db/connect";
import { notFound } from "../../lib/errors";
import { validate } from "../../middleware/validate";
import { readRaw } from "../../platforms/raw-payload";
import { isPlatform } from "../../platforms/types";
import { eventLogStore } from "../../stores/event-log";
import { router } from "../app-env";


const EventParam = z.object({ eventId: z.string().min(1).max(1024) });

/**
 * What a platform's user wrote is in the payload as sent: opened in an operator's browser it is data, never a page
 * (no sniffing it as HTML, no script or style run, no origin of the host's given to it).
 */
const AS_DATA_ONLY = { "x-content-type-options": "nosniff", "content-security-policy": "default-src 'none'; sandbox" };

/**
 * GET /v1/admin/events/{event_id}/raw: what a chat platform sent for one of its events, as stored (its secret fields
 * removed), for an operator wiring a bot. Events sent through the API, and the host's own records, keep none.
 */
export const adminEventsRouter = router().get("/:eventId/raw", validate("param", EventParam), async (c) => {
  const { eventId } = c.req.valid("param");
  const row = await eventLogStore(dbOf(c.env)).get(eventId);
  if (!row) throw notFound(`event ${eventId} not found (never recorded, or deleted by retention)`);
  // A platform's event without one: R2 did not take it on a request the platform never sends again (../../platforms/raw-payload.ts).
  if (!row.rawRef && isPlatform(row.source)) throw notFound(`the raw payload of event ${eventId} was not stored: storage did not take it when ${row.source} sent it, and the event was kept without it`);
  if (!row.rawRef) throw notFound(`event ${eventId} has no raw payload: only chat platforms' events keep one`);
  const raw = await readRaw(c.env, row.source, row.rawRef);
  if (!raw) throw notFound(`the raw payload of event ${eventId} is no longer stored (deleted by retention)`);
  return c.body(raw.body, 200, { "content-type": raw.contentType, "cache-control": "no-store", ...AS_DATA_ONLY });
});
