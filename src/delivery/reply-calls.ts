/**
 * The platform calls of one reply session (./session.ts): a part of its text sent or edited, each of its files posted,
 * every call with its retries and recorded (./recorded-call.ts). A place that refuses the bot for good ends the session.
 */
import { ADAPTERS, surfaceAt } from "../platforms/registry";
import type { ApiResult, Messenger, PlatformAdapter, PlatformDelivery } from "../platforms/types";
import type { RunJob } from "../run/job";
import type { DeliveryDeps } from "./deps";
import { answerFiles } from "./files";
import { recordedCall, type CallScope } from "./recorded-call";
import type { Reply, SentMessage } from "./reply";

export class ReplyCalls {
  private readonly adapter: PlatformAdapter;

  constructor(
    private readonly deps: DeliveryDeps,
    private readonly job: RunJob,
    private readonly delivery: PlatformDelivery,
    private readonly calls: CallScope,
    /** The session's messenger: set once its bot is read, before any call is made. */
    private readonly messengerOf: () => Messenger,
    /** Abandons the session: the rest of the reply is not tried. */
    private readonly close: () => void,
  ) {
    this.adapter = ADAPTERS[delivery.target.platform];
  }

  private get closed(): boolean {
    return this.calls.abandoned();
  }

  private get interval(): number {
    return this.deps.config.DELIVERY_EDIT_INTERVAL_MS;
  }

  /** Each file as a message of its own, one at a time; answers how many were sent. */
  async sendFiles(reply: Reply): Promise<number> {
    const messenger = this.messengerOf();
    let sent = 0;
    for await (const { artifactId, loaded } of answerFiles(this.deps, this.job, reply.files, surfaceAt(this.delivery.target).maxFileBytes)) {
      if (this.closed) break;
      const facts = { operation: "send_file", reply: reply.index, item: reply.item, artifact_id: artifactId };
      if (!loaded.ok) {
        this.calls.trail.append([{ type: "delivery.failed", data: { ...facts, code: loaded.code, error: loaded.error, will_retry: false } }]);
        continue;
      }
      const file = loaded.file;
      // A post that may have been made (no answer came, or the platform says it may have) is not made again, unless
      // the platform drops a repeat (Lark). Steps before the post that show nothing come back as safe to repeat.
      const res = await this.call({ ...facts, bytes: file.size }, () => messenger.sendFile(file), 0, { retryMaybeApplied: this.adapter.surface.idempotentSends === true });
      if (res.ok) sent++;
    }
    return sent;
  }

  async send(reply: Reply, part: number, text: string, editable: boolean): Promise<boolean> {
    const messenger = this.messengerOf();
    // A send that may have been posted (no answer came, or the platform says it may have) is not made again, unless
    // the platform drops repeats.
    const retryMaybeApplied = this.adapter.surface.idempotentSends === true;
    const res = await this.call({ operation: "send", reply: reply.index, item: reply.item, part: part + 1, chars: text.length }, () => messenger.send(text, { editable }), 0, { retryMaybeApplied });
    if (!res.ok) {
      if (res.failure.maybeApplied) reply.unconfirmed.set(part, text);
      return false;
    }
    reply.messages[part] = { id: res.value, shown: text, lastWriteAt: Date.now() };
    return true;
  }

  async edit(reply: Reply, message: SentMessage, part: number, text: string): Promise<ApiResult<void>> {
    const messenger = this.messengerOf();
    // A retried edit is an edit too: it also waits out the interval.
    const res = await this.call({ operation: "edit", reply: reply.index, item: reply.item, part: part + 1, message_id: message.id, chars: text.length }, () => messenger.edit(message.id, text), this.interval);
    message.lastWriteAt = Date.now();
    if (res.ok) message.shown = text;
    return res;
  }

  /** One platform call with its retries, each attempt and outcome recorded (./recorded-call.ts). */
  private async call<T>(facts: Record<string, unknown>, attempt: () => Promise<ApiResult<T>>, minRetryGapMs: number, opts: { retryMaybeApplied?: boolean } = {}): Promise<ApiResult<T>> {
    const res = await recordedCall(this.calls, facts, attempt, minRetryGapMs, opts.retryMaybeApplied);
    // The place refuses the bot for good (it was removed, the chat is gone): the rest of the reply is not tried there.
    if (!res.ok && res.failure.placeGone) this.close();
    return res;
  }
}
