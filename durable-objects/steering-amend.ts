import type { SteeringInputItem } from "../src/protocol/host-api-results";
import { withEditedText, type MessageEdit } from "../src/run/edited-input";
import type { RunJob } from "../src/run/job";
import { bodyKeyOf, isWhole, itemOfBody, prefixOf, stored, stubOf, type Body, type ClaimStub, type Queued } from "./steering-storage";

/**
 * A claimed message its user edited before the run pulled it (steering-queue.ts `amend`, in the run's turn): the pull
 * gets its newest words, whatever order edits arrive in. False when it is not queued.
 */
export async function amendQueued(storage: DurableObjectStorage, runId: string, eventId: string, edit: MessageEdit): Promise<boolean> {
  const found = [...(await storage.list<Queued>({ prefix: prefixOf(runId) }))].find(([, v]) => stubOf(v).event_id === eventId);
  if (!found) return false;
  const [key, stub] = [found[0], stubOf(found[1])];
  if ((stub.revision ?? -Infinity) > edit.version) return true;
  const body = isWhole(found[1]) ? found[1] : await storage.get<Body>(bodyKeyOf(key));
  if (!body) return false;
  let value: { stub: ClaimStub; body: Body };
  if (stub.job) {
    // The job edited: the item pulled is made from it, and so is the run of the message should it be dropped and decided anew.
    const job: RunJob = { ...(body as RunJob), input: withEditedText(body.input, edit.text, edit.dropped) };
    value = stored(job, itemOfBody(stub, job), edit.version);
  } else {
    const item = itemOfBody(stub, body);
    const edited: SteeringInputItem = { ...item, input: withEditedText(item.input, edit.text, edit.dropped) };
    value = { stub: { ...stubOf(edited), revision: edit.version }, body: edited };
  }
  await storage.put({ [key]: value.stub, [bodyKeyOf(key)]: value.body });
  return true;
}
