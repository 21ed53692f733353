/**
 * A run's reply on its chat platform, driven by the run's ledger entries as they are published (durable-objects/run-one.ts).
 * Completed messages are sent (what they show: ./answer.ts), split at the platform's size (./parts.ts), their files
 * after them (./files.ts); with streaming on and an editable surface, deltas grow one message in place, edited at most
 * once per DELIVERY_EDIT_INTERVAL_MS, and the completed text always replaces what was streamed exactly. Calls
 * (./reply-calls.ts) are retried (bounded, honouring rate limits) and every attempt and outcome lands in EventLog.
 * Nothing here can fail or delay the run: the run's status is written before `settle` is awaited.
 */
import { asRecord } from "../platforms/http";
import { scrubSecrets } from "../platforms/redact";
import { ADAPTERS, surfaceAt } from "../platforms/registry";
import { grownDraft } from "../platforms/split";
import type { Messenger, PlatformAdapter, PlatformDelivery } from "../platforms/types";
import { parseResultPayload } from "../protocol/results";
import { hostFailureEntry } from "../run/host-end";
import type { RunJob } from "../run/job";
import type { LedgerEntry } from "../stores/runs";
import { answerOf, cancelledByHost, endMarkOf, FILES_NOT_SENT_NOTICE, noticeInsteadOfAnswer, textOf, withEndMark } from "./answer";
import { FinalAnswer } from "./final-answer";
import { DeliveryTrail } from "./records";
import { Naps } from "./naps";
import { awaitReplyBot } from "./reply-bot";
import { chatMoveNoter } from "../stores/chat-moves";
import type { RetryPolicy } from "./retry";
import type { CallScope } from "./recorded-call";
import { loggedError } from "../lib/describe-error";
import type { ReplyTurn } from "./reply-order";
import { markedMessenger } from "./posting-marks";
import { ShownCap } from "./shown-cap";
import { ReplyCalls } from "./reply-calls";
import type { DeliveryDeps } from "./deps";
import { partsRoom, replyParts } from "./parts";
import type { Reply } from "./reply";

// Declared in ./deps.ts; the conversation object and the lost-run path import them from here.
export { chatReplyDeps, type DeliveryDeps } from "./deps";

/** What a streamed message beyond the final text's parts is edited to. */
const SUPERSEDED_PART = "…";
/** How long after its settle bound a reply's delivery records may still be written (at most as long as the reply had). */
const TRAIL_FLUSH_GRACE_MS = 10_000;

export class DeliverySession {
  private chain: Promise<void>;
  /** The replies before this one (ReplyOrder): its first platform call waits for them, its settle window starts after them. */
  private readonly turn: ReplyTurn;
  private messenger: Messenger | null = null;
  private readonly adapter: PlatformAdapter;
  private readonly trail: DeliveryTrail;
  private readonly streaming: boolean;
  private readonly retry: RetryPolicy;
  private current: Reply | null = null;
  private replies = 0;
  /** At most DELIVERY_MAX_PARTS of the run's messages, and as many files, are shown; the rest is said once at the end. */
  private readonly cap: ShownCap;
  private readonly final = new FinalAnswer();
  /** Artifacts announced since the last message, each once (in announcement order): they belong to the next one, as in the transcript. */
  private readonly pendingFiles = new Set<string>();
  private closed = false;
  private scrub: (text: string) => string = (text) => text;
  private readonly naps = new Naps();
  private readonly calls: CallScope;
  /** Its sends, edits and file posts, each with its retries and recorded. */
  private readonly replyCalls: ReplyCalls;

  /** Whether it still delivers (not abandoned after its settle timeout, its bot still usable, its place not gone). */
  get usable(): boolean {
    return !this.closed;
  }

  /** A session for a job with a platform reply target; null otherwise. */
  static open(deps: DeliveryDeps, job: RunJob): DeliverySession | null {
    return job.delivery ? new DeliverySession(deps, job, job.delivery) : null;
  }

  /**
   * For a run the host ended itself: the reply in progress hears the run
   * failed (a notice if it showed nothing); without one (it was lost, or the
   * run failed before it opened), a session of its own does. Settle it.
   */
  static failureNotice(deps: DeliveryDeps, job: RunJob, code: string, session = DeliverySession.open(deps, job)): DeliverySession | null {
    session?.feed([hostFailureEntry(job, code)]);
    return session;
  }

  /** For a run cancelled before it started, on a surface still showing a placeholder for it: a session that resolves it. Settle it. */
  static cancelNotice(deps: DeliveryDeps, job: RunJob): DeliverySession | null {
    return job.delivery && ADAPTERS[job.delivery.target.platform].surface.awaitsAnswer ? DeliverySession.failureNotice(deps, job, "cancelled") : null;
  }

  private constructor(
    private readonly deps: DeliveryDeps,
    private readonly job: RunJob,
    private readonly delivery: PlatformDelivery,
  ) {
    this.adapter = ADAPTERS[delivery.target.platform];
    this.streaming = job.agent.deliveryPolicy.streaming && surfaceAt(delivery.target).canEdit;
    this.trail = new DeliveryTrail(deps.db, job, delivery.target.platform, deps.config.DB_WRITE_RETRY_PAUSES_MS, (id) => this.messenger?.chatOf?.(id));
    this.retry = { maxAttempts: deps.config.DELIVERY_MAX_ATTEMPTS, baseMs: deps.config.DELIVERY_RETRY_BASE_MS, maxRetryAfterMs: deps.config.DELIVERY_MAX_RETRY_AFTER_MS };
    this.calls = { retry: this.retry, trail: this.trail, abandoned: () => this.closed, scrub: (text) => this.scrub(text), sleep: (ms) => this.sleep(ms) };
    this.replyCalls = new ReplyCalls(deps, job, delivery, this.calls, () => this.messenger!, () => this.close());
    this.turn = deps.order.turn();
    this.cap = new ShownCap(deps.config.DELIVERY_MAX_PARTS);
    this.chain = this.turn.done.then(() => this.connect());
  }

  /**
   * Credentials are read when the reply's turn comes, so a rotated token is
   * used at once. A database that does not answer is asked again, backing off, until
   * the session is settled: the reply waits for it rather than being lost.
   */
  private async connect(): Promise<void> {
    const loaded = await awaitReplyBot(this.deps.db, this.delivery, this.calls);
    if (!loaded.ok) {
      this.closed = true;
      return;
    }
    const bot = loaded.value;
    const messenger = this.adapter.messenger(bot, this.delivery.target, this.deps.config.PLATFORM_API_TIMEOUT_MS, { scope: this.job.runId, format: this.job.agent.deliveryPolicy.format, onChatMoved: chatMoveNoter(this.deps.db, bot) });
    this.messenger = markedMessenger(messenger, this.deps.marks, this.job.runId);
    this.scrub = (text) => scrubSecrets(text, bot.credentials);
  }

  /** The publish seam: every ledger entry of the run, in order, as it is written. */
  feed(written: LedgerEntry[]): void {
    // What the host dropped (invalid, unknown) is recorded, never shown: neither its text nor as the run's end.
    const entries = written.filter((e) => !e.dropped);
    // The host may end a run the runner called complete (no message): the user hears how it really ended.
    const end = entries.findLastIndex((e) => e.type === "run.completed" || e.type === "run.failed");
    for (const [i, entry] of entries.entries()) {
      if (this.closed) return;
      const data = asRecord(entry.data);
      if (entry.type === "message.delta") {
        const chunk = asRecord(data.chunk);
        // Only the assistant's words are shown (a delta in another role was dropped), and a reply opens on its first
        // visible text: whitespace alone would count as an answer shown and hold back the notice.
        if (chunk.role !== "assistant") continue;
        const text = textOf(chunk.content);
        this.final.delta(text);
        if (!this.streaming || !text || (!this.current && (!text.trim() || this.cap.full(this.replies)))) continue;
        const reply = (this.current ??= this.newReply());
        reply.text = grownDraft(reply.text, text, this.adapter.surface.maxMessageSize, this.deps.config.DELIVERY_MAX_PARTS);
        if (!reply.pumping) {
          reply.pumping = true;
          this.enqueue(() => this.pump(reply));
        }
      } else if (entry.type === "artifact.created") {
        // Only a result the host accepted (it alone reached the transcript); inline content is recorded with the id
        // the host stored it under.
        const parsed = entry.origin === "runner" ? parseResultPayload(entry.type, entry.data) : null;
        const announced = parsed?.kind === "ok" && parsed.result.type === "artifact.created" ? parsed.result.data.artifact_id : undefined;
        if (announced) this.pendingFiles.size < this.cap.filesLeft ? this.pendingFiles.add(announced) : this.cap.fileCut();
      } else if (entry.type === "message.completed") {
        // Accepted, it is the run's message whatever it shows here: run.completed repeating it is then ignored, as
        // the transcript ignores it.
        this.final.completed(entry);
        const answer = this.answerOf(data.message);
        if (answer === null) continue;
        this.complete(answer.text, answer.files, null, false, this.final.itemOf(entry));
      } else if (i === end) {
        // run.completed may carry the only message, or the final one after others; a stream cut short keeps exactly what it showed.
        const answer = entry.type === "run.completed" && this.final.isNew(entry) ? this.answerOf(data.message) : null;
        if (answer !== null) this.complete(answer.text, answer.files, null, false, this.final.itemOf(entry));
        // A run that failed before any of its draft reached the chat answers with the notice (host-cancelled: nothing);
        // one that failed or was cancelled after, marks the draft shown (finish).
        else if (this.current) {
          this.current.endMark = endMarkOf(this.job, this.adapter.surface, entry);
          this.complete(this.current.text, [], entry.type === "run.failed" ? (noticeInsteadOfAnswer(this.job, this.adapter.surface, entry) ?? (cancelledByHost(entry) ? "" : null)) : null, false, this.final.itemOf(entry));
        }
        // Streamed as deltas to a chat that does not stream, never completed: the run's message, sent whole.
        else if (entry.type === "run.completed" && this.final.unfinished) this.complete(this.final.unfinished, [], null, false, this.final.itemOf(entry));
        else if (this.replies === 0) {
          const notice = noticeInsteadOfAnswer(this.job, this.adapter.surface, entry);
          if (notice !== null) this.complete(notice);
        }
        // Files announced after the last message, which no message carried: sent on their own (as the transcript keeps them).
        if (this.pendingFiles.size) this.complete("", this.takePendingFiles());
        const cut = this.cap.notice();
        if (cut) this.complete(cut, [], null, true);
      }
    }
  }

  /** What to deliver for a message result; the files announced before it go with it. */
  private answerOf(message: unknown): { text: string; files: string[] } | null {
    const answer = answerOf(message, [...this.pendingFiles]);
    if (answer) this.pendingFiles.clear();
    return answer;
  }

  private takePendingFiles = (): string[] => ((files) => (this.pendingFiles.clear(), files))([...this.pendingFiles]);

  /**
   * Wait for every send and edit and their records, for `timeoutMs` from now
   * or from when the replies before this one will have settled, whichever is
   * later. Past that bound the rest is abandoned and recorded as such.
   */
  settle(timeoutMs: number): Promise<void> {
    const bound = Math.max(Date.now(), this.turn.bound) + timeoutMs;
    const settled = this.settled(bound, timeoutMs);
    this.deps.order.settling(settled, bound);
    return settled;
  }

  private async settled(bound: number, timeoutMs: number): Promise<void> {
    if (this.current) this.complete(this.current.text);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = await Promise.race([this.chain.then(() => false), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), bound - Date.now())))]);
    clearTimeout(timer);
    if (timedOut) {
      this.close();
      const error = `delivery still busy ${timeoutMs} ms after the run ended and the replies before it settled; the rest is abandoned`;
      this.trail.append([{ type: "delivery.failed", data: { operation: "settle", code: "settle_timeout", error, will_retry: false } }]);
    }
    // Its records get as long again as the reply had, up to TRAIL_FLUSH_GRACE_MS: the alarm keeps about a minute past
    // the settle bound (durable-objects/timing.ts), a hanging write's query timeout included.
    await this.trail.flushed(bound + Math.min(timeoutMs, TRAIL_FLUSH_GRACE_MS));
  }

  private newReply(): Reply {
    return { index: ++this.replies, item: this.final.itemOf(), text: "", final: null, messages: [], files: [], pumping: false, broken: false, unconfirmed: new Map() };
  }

  private complete(text: string, files: string[] = [], unshownNotice: string | null = null, pastCap = false, item: number | null = null): void {
    // Files alone are no message of the run's: bounded by the files' own cap (take), never counted as a message cut.
    const filesAlone = !text.trim() && files.length > 0;
    if (!this.current && !pastCap && !filesAlone && this.cap.full(this.replies)) return this.cap.messageCut(files.length);
    const shownFiles = this.cap.take(files);
    // Files alone, all past the cap: no reply of their own.
    if (!this.current && !text.trim() && !shownFiles.length) return;
    const reply = this.current ?? this.newReply();
    Object.assign(reply, { unshownNotice, item });
    this.current = null;
    // A final message of files alone keeps what was streamed before it, whole.
    reply.final = text.trim() ? text : reply.text;
    reply.files = shownFiles;
    this.enqueue(() => this.finish(reply));
  }

  /** Platform calls run one at a time, in the order results arrived. */
  private enqueue(work: () => Promise<void>): void {
    this.chain = this.chain
      .then(() => (this.closed ? undefined : work()))
      .catch((err: Error) => console.error(`run ${this.job.runId}: delivery failed unexpectedly: ${loggedError(err)}`));
  }

  private get interval(): number {
    return this.deps.config.DELIVERY_EDIT_INTERVAL_MS;
  }

  /** Bring the streamed messages up to the text so far, never editing one message twice within the interval. */
  private async pump(reply: Reply): Promise<void> {
    try {
      while (!this.closed && reply.final === null && !reply.broken) {
        const parts = replyParts(reply.text, this.adapter, this.deps.config, this.job.agent.deliveryPolicy.format, true);
        const i = parts.findIndex((part, n) => reply.messages[n]?.shown !== part);
        // Nothing new, or only whitespace so far (platforms refuse blank messages).
        if (i < 0 || !parts[i].trim()) return;
        const message = reply.messages[i];
        if (!message) {
          if (!(await this.replyCalls.send(reply, i, parts[i], true))) reply.broken = true;
          continue;
        }
        const wait = message.lastWriteAt + this.interval - Date.now();
        // After the wait the text is read again: deltas that came meanwhile go out in this one edit.
        if (wait > 0) await this.sleep(wait);
        else if (!(await this.replyCalls.edit(reply, message, i, parts[i])).ok) reply.broken = true;
      }
    } finally {
      reply.pumping = false;
    }
  }

  /** The final text, then the files; an answer of files alone that could send none says so. */
  private async finish(reply: Reply): Promise<void> {
    // Nothing of the draft shown (or maybe shown: a send unanswered, whose text is not posted again): no mark either.
    const shown = reply.messages.length > 0 && !reply.unconfirmed.size;
    const text = reply.unshownNotice != null && !reply.messages.length && !reply.unconfirmed.size ? reply.unshownNotice : reply.endMark && shown ? withEndMark(reply.final ?? "", reply.endMark) : (reply.final ?? "");
    if (text.trim()) await this.finishText(reply, text);
    if (reply.files.length === 0) return;
    const sent = await this.replyCalls.sendFiles(reply);
    if (sent === 0 && reply.messages.length === 0 && !this.closed) await this.replyCalls.send(reply, 0, FILES_NOT_SENT_NOTICE, false);
  }

  /** The final text, exactly: streamed messages corrected in place, the remaining parts sent. */
  private async finishText(reply: Reply, text: string): Promise<void> {
    const partsIn = (room: number) => replyParts(text, this.adapter, this.deps.config, this.job.agent.deliveryPolicy.format, false, room);
    const roomNow = () => partsRoom(this.messenger!, reply.messages.length, this.deps.config);
    let room = roomNow();
    let parts = partsIn(room);
    for (let i = 0; i < parts.length && !this.closed; i++) {
      const message = reply.messages[i];
      if (message?.shown === parts[i] || !parts[i].trim()) continue;
      // A send of this very text may already be in the chat: not posted twice. A different text still goes out.
      if (!message && reply.unconfirmed.get(i) === parts[i]) continue;
      if (message) {
        const wait = message.lastWriteAt + this.interval - Date.now();
        if (wait > 0) await this.sleep(wait);
        // The draft of a run that ended without its answer is only marked in place: never posted again beside it.
        if ((await this.replyCalls.edit(reply, message, i, parts[i]).then((r) => r.ok || r.failure.maybeApplied)) || reply.endMark) continue;
        // Not corrected, the exact text goes out as a new one (one that may have landed shows it: not posted beside it).
      }
      await this.replyCalls.send(reply, i, parts[i], false);
      // That send may have found the rest goes a way that takes only so many posts (a Slack command's response_url).
      if (roomNow() < room) parts = partsIn((room = roomNow()));
    }
    // A draft that outgrew the final text: its extra messages must not keep showing stale text.
    for (let i = parts.length; i < reply.messages.length && !this.closed; i++) {
      const message = reply.messages[i];
      if (!message || message.shown === SUPERSEDED_PART) continue;
      const wait = message.lastWriteAt + this.interval - Date.now();
      if (wait > 0) await this.sleep(wait);
      await this.replyCalls.edit(reply, message, i, SUPERSEDED_PART);
    }
  }

  /** A wait that ends early when the session is abandoned. */
  private sleep(ms: number): Promise<void> {
    return this.closed ? Promise.resolve() : this.naps.sleep(ms);
  }

  private close(): void {
    this.closed = true;
    this.naps.wakeAll();
  }
}
