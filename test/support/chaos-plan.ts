import { BEHAVIOURS, expectedOf, type Behaviour } from "./chaos-runner";
import { seededRandom } from "./seeded-random";

/**
 * When an event is sent: its conversation's first; while the run before it is held busy (queued behind it, or, in a
 * steering conversation, claimed by it); once that run has ended; at once; or, the final one, once all have ended.
 */
export type Timing = "first" | "busy" | "steered" | "after" | "whenever" | "final";

export interface Planned {
  eventId: string;
  behaviour: Behaviour;
  timing: Timing;
  /** Sent a second time, as a client retrying: a duplicate of the first. */
  resend: boolean;
}

export interface Conversation {
  id: string;
  /** Bound to the steering runner (its events carry this workspace), else to the plain one. */
  steering: boolean;
  events: Planned[];
}

/** The workspace whose conversations the steering agent answers. */
export const STEERING_WORKSPACE = "steer";

/**
 * `count` conversations of a few events each, chosen by `seed`. Every behaviour opens a few conversations whatever
 * the seed; the rest (later behaviours, timings, retries, which conversations steer) is the seed's.
 */
export function chaosPlan(seed: number, count: number): Conversation[] {
  const random = seededRandom(seed);
  const firsts = random.shuffle(Array.from({ length: count }, (_, i) => BEHAVIOURS[i % BEHAVIOURS.length]));
  return firsts.map((first, i) => {
    const id = `chaos-c${i}`;
    // A good first run pulls what it was steered (the rest drop it): good ones steer more often, so both happen.
    const steering = random.chance(first === "good" ? 0.6 : 0.2);
    const behaviours: Behaviour[] = [first];
    const size = random.chance(0.5) ? 3 : 2;
    while (behaviours.length < size) {
      const next = random.pick(BEHAVIOURS);
      // One hang at most per conversation: each waits out the whole deadline.
      if (!(next === "hang" && behaviours.includes("hang"))) behaviours.push(next);
    }
    const events: Planned[] = behaviours.map((behaviour, j) => ({ eventId: `${id}-e${j}`, behaviour, timing: timingOf(j, steering, random.pick(["busy", "busy", "after", "whenever"] as const)), resend: random.chance(0.2) }));
    events.push({ eventId: `${id}-final`, behaviour: "final", timing: "final", resend: false });
    return { id, steering, events };
  });
}

/**
 * A steering conversation's second event is claimed by its first run, held busy; the rest wait for what came before
 * (sent at once, they would race the claim, pulled or not as timing has it).
 */
function timingOf(index: number, steering: boolean, random: Timing): Timing {
  if (index === 0) return "first";
  if (steering) return index === 1 ? "steered" : "after";
  return random;
}

/**
 * Who answers a steered event: the run that claimed it, if its runner pulls it (a good run does); else, dropped when
 * that run ends, a run of its own (README "Steering": decided anew).
 */
export const pulledBy = (conversation: Conversation, event: Planned): Planned | undefined => {
  if (event.timing !== "steered") return undefined;
  const claimer = conversation.events[conversation.events.indexOf(event) - 1];
  return claimer.behaviour === "good" ? claimer : undefined;
};

/** A disposition as the plan can know it: a run that has just ended may still be finishing, so an event after it may queue. */
export const plannedDisposition: Record<Timing, string> = {
  first: "started",
  busy: "queued",
  steered: "steered",
  after: "started or queued",
  whenever: "started or queued",
  final: "started or queued",
};

/** What the host recorded of one conversation (as the test reads it), or should have (as the plan says). */
export interface ConversationFacts {
  /** What each POST /v1/events answered, and a retry of it. */
  answers: { event: string; status: number; disposition: string; repeat?: { status: number; disposition: string; sameRun: boolean } }[];
  /** GET /v1/events/{id}: its disposition, and whose own run answers it. */
  recorded: { event: string; disposition: string; answeredBy: string }[];
  /** Each run of an event of its own: its end, and the run requests its runner got for it. */
  runs: { event: string; status: string; code?: string; calls: string[] }[];
  runCount: number;
  /** The message.received records EventLog holds, by event id. */
  loggedOnce: string[];
  /** Steering outcomes, [record type, steered event], oldest first. */
  steering: string[][];
  pagesWhole: boolean;
  /** Transcript items, oldest first: [event_id, content]. */
  user: string[][];
  assistant: string[][];
  /** What each good run's steering.pull gave it. */
  pulled: [string, string[] | undefined][];
  /** The final run's own reading: its history's user items, those of another conversation, its state keys. */
  finalReport: { user: string[]; foreign: number; keys: string[] };
}

/** What the host should have recorded of one conversation, in the shape the test reads its facts in. */
export function expectationOf(conversation: Conversation): ConversationFacts {
  const events = conversation.events;
  const ids = events.map((e) => e.eventId);
  const own = events.filter((e) => !pulledBy(conversation, e));
  return {
    answers: events.map((e) => ({ event: e.eventId, status: 202, disposition: plannedDisposition[e.timing], repeat: e.resend ? { status: 200, disposition: "duplicate", sameRun: true } : undefined })),
    recorded: events.map((e) => ({ event: e.eventId, disposition: pulledBy(conversation, e) ? "steered" : "bound", answeredBy: (pulledBy(conversation, e) ?? e).eventId })),
    runs: own.map((e) => ({ event: e.eventId, status: expectedOf(e.behaviour, e.eventId).status, code: expectedOf(e.behaviour, e.eventId).code, calls: [`${e.behaviour} ${e.eventId}`] })),
    runCount: own.length,
    loggedOnce: [...ids].sort(),
    steering: events.filter((e) => e.timing === "steered").map((e) => [pulledBy(conversation, e) ? "steering.injected" : "steering.dropped", e.eventId]),
    pagesWhole: true,
    user: events.map((e) => [e.eventId, `${e.behaviour} ${e.eventId}`]),
    assistant: own.flatMap((e) => expectedOf(e.behaviour, e.eventId).assistant.map((content) => [e.eventId, content])),
    pulled: own.filter((e) => e.behaviour === "good").map((e) => [e.eventId, events.filter((s) => pulledBy(conversation, s) === e).map((s) => s.eventId)] as [string, string[]]),
    finalReport: {
      user: ids,
      foreign: 0,
      // The host seeds external.conversation_id (PROTOCOL §9); the rest are what the good runs wrote.
      keys: ["external.conversation_id", ...own.flatMap((e) => expectedOf(e.behaviour, e.eventId).stateKeys)].sort(),
    },
  };
}
