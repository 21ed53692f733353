import { request } from "node:http";
import { connect } from "node:net";
/** The raw Host API response (for streams and exact bodies), as a runner would get it. */
export function rawHostApi(baseUrl: string, runId: string, token: string, action: string, params: Record<string, unknown> = {}): Promise<Response> {
  return fetch(`${baseUrl}/v1/runs/${runId}/api`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ action, params }),
  });
}

/** Call the Host API as a runner would. */
export async function callHostApi(baseUrl: string, runId: string, token: string, action: string, params: Record<string, unknown> = {}) {
  const res = await rawHostApi(baseUrl, runId, token, action, params);
  return { status: res.status, body: (await res.json()) as { ok: boolean; data?: any; error?: { code: string; message: string } } };
}

/** A deferred promise, to hold a runner mid-run until the test lets it go. */
export function deferred<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** Gates by key (a conversation, say), each made on first use: `gate(key)` holds a runner, `releaseAll` lets every one go. */
export function keyedGates() {
  const gates = new Map<string, ReturnType<typeof deferred<void>>>();
  const gate = (key: string) => gates.get(key) ?? (gates.set(key, deferred<void>()), gates.get(key)!);
  const releaseAll = () => {
    for (const g of gates.values()) g.resolve();
  };
  return { gate, releaseAll };
}

/** n bytes in a pattern that repeats only every 251 bytes, so a lost, doubled or reordered chunk shows. */
export function largeFile(n: number): Buffer {
  const bytes = Buffer.alloc(n);
  for (let i = 0; i < n; i++) bytes[i] = (i * 7 + (i >> 16)) % 251;
  return bytes;
}

/** The bytes as a stream of `size`-byte chunks (the last shorter): sent as a body, it goes out chunked, without a length. */
export function inChunks(bytes: Uint8Array, size = 100_003): ReadableStream<Uint8Array> {
  let offset = 0;
  return new ReadableStream({
    pull(controller) {
      if (offset >= bytes.length) return controller.close();
      controller.enqueue(new Uint8Array(bytes.subarray(offset, (offset += size))));
    },
  });
}

/** `artifact.upload` as a runner would: raw bytes to PUT /v1/runs/{run_id}/artifacts. */
export async function uploadArtifact(
  baseUrl: string,
  runId: string,
  token: string,
  body: Uint8Array | ReadableStream<Uint8Array>,
  query: Record<string, string> = {},
  headers: Record<string, string> = {},
) {
  const res = await fetch(`${baseUrl}/v1/runs/${runId}/artifacts?${new URLSearchParams(query)}`, {
    method: "PUT",
    headers: { ...headers, authorization: `Bearer ${token}` },
    body,
    // A stream body goes out chunked, without Content-Length.
    ...(body instanceof ReadableStream ? { duplex: "half" } : {}),
  } as RequestInit);
  return { status: res.status, body: (await res.json()) as { ok: boolean; data?: any; error?: { code: string; message: string } } };
}

/**
 * A PUT to the upload route written by hand on a socket: it declares
 * `declared` bytes, sends `body`, then closes its side (`end`) or stalls.
 * Resolves with whatever the host answered, raw ("closed" if nothing).
 */
export function rawUpload(baseUrl: string, runId: string, token: string, opts: { declared: number; body: string; end: boolean }): Promise<string> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname, () => {
      socket.write(`PUT /v1/runs/${runId}/artifacts HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${token}\r\nContent-Length: ${opts.declared}\r\n\r\n${opts.body}`);
      if (opts.end) socket.end();
    });
    let answer = "";
    socket.on("data", (d) => {
      answer += d;
      // A stalled sender never closes: the answer is complete once its declared body is.
      const head = answer.indexOf("\r\n\r\n");
      const length = /\r\ncontent-length: *(\d+)/i.exec(answer.slice(0, head));
      if (!opts.end && head >= 0 && length && Buffer.byteLength(answer.slice(head + 4)) >= Number(length[1])) socket.destroy();
    });
    socket.on("close", () => resolve(answer || "closed"));
    socket.on("error", () => resolve("closed"));
  });
}

/**
 * A request whose body stalls halfway: it declares `declared` bytes, sends
 * `first`, waits `pauseMs` (and for `duringPause`, whose answer it keeps),
 * then sends the rest. Says whether the host answered during the pause
 * (before the body was whole), and what it answered or how the connection failed.
 * `headers` are sent besides the bearer and the length (a Content-Encoding, say).
 */
export function stalledBody<T = undefined>(
  url: string,
  opts: { method: string; token: string; declared: number; first: number; pauseMs: number; duringPause?: () => Promise<T>; headers?: Record<string, string> },
) {
  return new Promise<{ answeredDuringPause: boolean; status?: number; error?: string; seenDuringPause?: T }>((resolve) => {
    let pausing = true;
    let answeredDuringPause = false;
    let seenDuringPause: T | undefined;
    const headers = { ...opts.headers, authorization: `Bearer ${opts.token}`, "content-length": String(opts.declared) };
    const req = request(url, { method: opts.method, headers }, (res) => {
      answeredDuringPause = pausing;
      res.resume();
      res.on("end", () => resolve({ answeredDuringPause, status: res.statusCode, ...(opts.duringPause ? { seenDuringPause } : {}) }));
    });
    req.on("error", (err: NodeJS.ErrnoException) => resolve({ answeredDuringPause, error: err.code ?? err.message }));
    req.write(Buffer.alloc(opts.first, 0x20));
    const pause = new Promise((r) => setTimeout(r, opts.pauseMs));
    void Promise.all([pause, opts.duringPause?.().then((seen) => (seenDuringPause = seen))]).then(() => {
      pausing = false;
      req.end(Buffer.alloc(opts.declared - opts.first, 0x20));
    });
  });
}

/**
 * A PUT whose body goes out chunked (no Content-Length) in `parts`, each sent once its `before` has resolved. Says
 * whether the host answered before the last part was sent, and what it answered or how the connection failed.
 */
export function chunkedInParts(url: string, token: string, parts: { bytes: number; before?: () => Promise<unknown> }[]) {
  return new Promise<{ answeredEarly: boolean; status?: number; error?: string }>((resolve) => {
    let sentAll = false;
    const req = request(url, { method: "PUT", headers: { authorization: `Bearer ${token}` } }, (res) => {
      const answeredEarly = !sentAll;
      res.resume();
      res.on("end", () => resolve({ answeredEarly, status: res.statusCode }));
    });
    req.on("error", (err: NodeJS.ErrnoException) => resolve({ answeredEarly: !sentAll, error: err.code ?? err.message }));
    void (async () => {
      for (const part of parts) {
        await part.before?.();
        if (req.destroyed) return;
        req.write(Buffer.alloc(part.bytes, 0x20));
      }
      sentAll = true;
      req.end();
    })();
  });
}

/**
 * A POST written by hand on a socket, its body chunked yet also declaring a small Content-Length (a request smuggling
 * shape that workerd passes through with both headers): sends the first `first` bytes, waits for `duringPause` (and
 * keeps its answer), then sends the rest. Resolves with what was seen during the pause and the answer's status.
 */
export function chunkedWithSmallLength<T>(url: string, opts: { token: string; declared: number; first: number; rest: number; duringPause: () => Promise<T> }) {
  const { hostname, port, pathname } = new URL(url);
  const chunk = (n: number) => `${n.toString(16)}\r\n${" ".repeat(n)}\r\n`;
  return new Promise<{ seenDuringPause: T; status: number | "closed" }>((resolve) => {
    let paused: Promise<T> | undefined;
    let answer = "";
    const socket = connect(Number(port), hostname, () => {
      socket.write(`POST ${pathname} HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${opts.token}\r\nContent-Length: ${opts.declared}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${chunk(opts.first)}`);
      paused = opts.duringPause();
      void paused.then(() => socket.writable && socket.write(`${chunk(opts.rest)}0\r\n\r\n`));
    });
    socket.on("data", (d) => (answer += d));
    socket.on("error", () => socket.destroy());
    socket.on("close", async () => resolve({ seenDuringPause: await paused!, status: Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]) || "closed" }));
  });
}
