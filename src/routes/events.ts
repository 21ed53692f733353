import { EventEnvelopeSchema } from "../protocol/envelope";
import { acceptEvent } from "../ingress/accept";
import { eventFingerprint } from "../ingress/fingerprint";
import { attachmentSourcesOf } from "../ingress/attachments";
import { adminAuth } from "../middleware/admin-auth";
import { limitBody } from "../middleware/body-limit";
import { jsonBody } from "../middleware/validate";
import { configOf } from "../env";
import { dbOf } from "../db/connect";
import { notFound } from "../lib/errors";
import { eventLogStore, toOperatorEventView } from "../stores/event-log";
import { publicBaseUrl, router } from "./app-env";

/** POST /v1/events: the public HTTP ingress. Answers as soon as the event is durable and handed over. GET: one recorded event. */
export const eventsRouter = router()
  .get("/:eventId", adminAuth(), async (c) => {
    const row = await eventLogStore(dbOf(c.env)).get(c.req.param("eventId"));
    if (!row) throw notFound(`event ${c.req.param("eventId")} not found`);
    return c.json(toOperatorEventView(row));
  })
  .post(
    "/",
    adminAuth(),
    (c, next) => limitBody(configOf(c.env).MAX_EVENT_BODY_BYTES)(c, next),
    // Its data, metadata, actor.metadata and subject.data are kept as sent: a whole number parsing would round is a 400.
    jsonBody(EventEnvelopeSchema, { exact: true }),
    async (c) => {
      const body = c.get("body");
      const accepted = await acceptEvent(
        c.env,
        {
          ...body,
          event_id: body.event_id ?? undefined,
          event_time: body.event_time ?? undefined,
          source: "api",
          actor: { ...body.actor, metadata: body.actor.metadata ?? {} },
          subject: body.subject ? { ...body.subject, data: body.subject.data ?? {} } : null,
          input: { text: body.input?.text ?? null, contents: body.input?.contents ?? [], attachments: [] },
          attachmentSources: attachmentSourcesOf(body.input),
          data: body.data ?? {},
          metadata: body.metadata ?? {},
          // Only a caller's own event_id can be sent again: a generated one needs no fingerprint.
          fingerprint: body.event_id ? await eventFingerprint(body) : undefined,
        },
        publicBaseUrl(c.env, c.req.url),
      );
      // Why a rejected event was is on its record (GET /v1/events/{event_id}), not in this answer.
      const { rejection: _why, ...answer } = accepted;
      return c.json(answer, accepted.disposition === "duplicate" ? 200 : 202);
    },
  );
