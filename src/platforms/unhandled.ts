import { sha256Hex } from "../lib/crypto";
import type { NormalizedEvent } from "./types";

/** An event the host records and acknowledges but does not run. */
export function unhandledEvent(key: string, sourceEventType: string, eventTime?: string): NormalizedEvent {
  return { key, eventType: null, sourceEventType, eventTime, conversationId: null, threadId: null, actor: null, text: null, files: [], data: {}, replyTarget: null };
}

/** The key of a payload that carries no id of its own: its body's digest, so a redelivery maps to the same key. */
export async function bodyKey(rawBody: string): Promise<string> {
  return `body:${(await sha256Hex(rawBody)).slice(0, 32)}`;
}
