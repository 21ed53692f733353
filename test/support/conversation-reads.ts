import { callHostApi } from "./host-api";

/** What a run could read of its conversation through the Host API, and its answer to `event.get` of one event. */
export interface ConversationReads {
  history: string[];
  search: string[];
  events: any[];
  get: { status: number; code?: string };
}

/**
 * Read as a runner does, with a run's own token (`ctx` is its AgentRunContext): its history page, a search for
 * "secret", its event page, and `event.get` of `eventId` (the privacy tests' "who reads what").
 */
export async function readConversation(ctx: { run_id: string; runtime: { api: { base_url: string; token: string } } }, eventId: string): Promise<ConversationReads> {
  const api = (action: string, params: Record<string, unknown>) => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, action, params);
  const history = (await api("history.page", { limit: 100 })).body.data.items.map((i: any) => String(i.content ?? ""));
  const search = (await api("history.search", { query: "secret", top_k: 50 })).body.data.items.map((i: any) => String(i.content ?? ""));
  const events = (await api("event.page", { limit: 100 })).body.data.items;
  const got = await api("event.get", { event_id: eventId });
  return { history, search, events, get: { status: got.status, code: got.body.error?.code } };
}
