/**
 * An example runner service (PROTOCOL.md): a small Hono app on Node that any
 * runner author could write. Its one runner, `default`, reads the previous
 * user message through `history.page`, counts turns in conversation state,
 * and streams its reply as deltas, then a completed message.
 */
import { serve } from "@hono/node-server";
import { createHmac, timingSafeEqual } from "node:crypto";
import type { AddressInfo } from "node:net";
import { Hono } from "hono";
import type { AgentRunContext } from "../../src/protocol/context";

export const MANIFEST = {
  protocol: "agent-runner/v1",
  author: "examples",
  name: "echo",
  version: "1.0.0",
  runners: [
    {
      name: "default",
      label: { en_US: "Echo", zh_Hans: "回声" },
      description: { en_US: "Echoes the message, quotes the previous one, counts turns." },
      capabilities: { streaming: true },
      permissions: { history: ["page"], events: ["get", "page"] },
      config_schema: [{ name: "greeting", type: "string", label: { en_US: "Greeting" }, required: false, default: "You said" }],
    },
  ],
};

/** Reject requests not signed by the host (when a secret is configured), or older than 5 minutes. */
function verifySignature(secret: string, timestamp: string | undefined, signature: string | undefined, body: string): boolean {
  if (!timestamp || !signature) return false;
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > 300) return false;
  const expected = Buffer.from(`v1=${createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex")}`);
  const given = Buffer.from(signature);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

async function hostApi<T>(ctx: AgentRunContext, action: string, params: Record<string, unknown>): Promise<T> {
  const res = await fetch(`${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/api`, {
    method: "POST",
    headers: { authorization: `Bearer ${ctx.runtime.api.token}`, "content-type": "application/json" },
    body: JSON.stringify({ action, params }),
  });
  const body = (await res.json()) as { ok: boolean; data?: unknown; error?: { message: string } };
  if (!body.ok) throw new Error(`${action} failed: ${body.error?.message}`);
  return body.data as T;
}

/** A message's text: `input.text`, or the text of its parts when it came as `input.contents` (PROTOCOL §5). */
function textOf(input: AgentRunContext["input"]): string {
  return input.text || (input.contents ?? []).flatMap((el) => (el.type === "text" ? [el.text] : [])).join("");
}

async function previousUserMessage(ctx: AgentRunContext): Promise<string | null> {
  if (!ctx.context.available_apis.history_page || !ctx.context.latest_cursor) return null;
  const page = await hostApi<{ items: { role: string; content?: string }[] }>(ctx, "history.page", { before_cursor: ctx.context.latest_cursor, limit: 20, direction: "backward" });
  const item = page.items.find((i) => i.role === "user");
  return item?.content ?? null;
}

/** The request's context, or null when the body is not an AgentRunRequest: a caller's error (400), not a crash (500). */
function contextOf(raw: string): AgentRunContext | null {
  try {
    const ctx = (JSON.parse(raw) as { context?: AgentRunContext } | null)?.context;
    return ctx && typeof ctx.run_id === "string" && typeof ctx.input === "object" && ctx.input !== null ? ctx : null;
  } catch {
    return null;
  }
}

export function createEchoRunner(opts: { secret?: string } = {}) {
  const app = new Hono();
  app.get("/manifest", (c) => c.json(MANIFEST));
  app.post("/runners/default/run", async (c) => {
    const raw = await c.req.text();
    if (opts.secret && !verifySignature(opts.secret, c.req.header("x-agent-timestamp"), c.req.header("x-agent-signature"), raw)) {
      return c.json({ error: "bad signature" }, 401);
    }
    const ctx = contextOf(raw);
    if (!ctx) return c.json({ error: "the body is not an AgentRunRequest (JSON with a context)" }, 400);
    const text = textOf(ctx.input);
    // The scopes its agent enables are named in runtime.metadata.state_scopes: without conversation state, every turn is the first.
    const scopes = ctx.runtime?.metadata?.state_scopes;
    const conversationState = Array.isArray(scopes) && scopes.includes("conversation");
    const turns = Number(ctx.state?.conversation?.turns ?? 0) + 1;
    const greeting = String(ctx.config?.greeting ?? "You said");
    const encoder = new TextEncoder();
    let sequence = 0;
    const line = (type: string, data: unknown) => encoder.encode(`${JSON.stringify({ run_id: ctx.run_id, type, data, sequence: ++sequence })}\n`);
    const stream = new ReadableStream<Uint8Array>({
      async start(controller) {
        try {
          const previous = await previousUserMessage(ctx);
          const reply = `${greeting}: "${text}" (turn ${turns})${previous ? `. Before that you said: "${previous}"` : ""}`;
          for (const word of reply.split(/(?<= )/)) controller.enqueue(line("message.delta", { chunk: { role: "assistant", content: word } }));
          controller.enqueue(line("message.completed", { message: { role: "assistant", content: reply } }));
          // Only an enabled scope can be written: a stateless agent's run has none.
          if (conversationState) controller.enqueue(line("state.updated", { scope: "conversation", key: "turns", value: turns }));
          controller.enqueue(line("run.completed", { finish_reason: "stop" }));
        } catch (err) {
          controller.enqueue(line("run.failed", { code: "runner.error", error: (err as Error).message, retryable: false }));
        }
        controller.close();
      },
    });
    return new Response(stream, { headers: { "content-type": "application/x-ndjson" } });
  });
  return app;
}

/** Listen on loopback; `port: 0` picks a free port. */
export async function startEchoRunner(opts: { port?: number; secret?: string } = {}): Promise<{ url: string; close(): Promise<void> }> {
  const app = createEchoRunner(opts);
  return new Promise((resolve) => {
    const server = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: opts.port ?? 0 }, (info: AddressInfo) => {
      resolve({
        url: `http://127.0.0.1:${info.port}`,
        close: () => new Promise<void>((done) => server.close(() => done())),
      });
    });
  });
}
