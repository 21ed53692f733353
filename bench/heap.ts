/**
 * workerd's V8 heap, read through its inspector (Miniflare's `inspectorPort`): the Worker's isolate, which its
 * Durable Objects share. A heap snapshot after full GCs tells what is still reachable: objects by constructor name,
 * the run ids some live string names (with a path from a GC root to a few of them, to find what keeps them), and
 * every kind of node's count and bytes (`growth` compares two reports). What the inspector itself keeps of the
 * Worker's console is counted and let go of first (see `takeConsole`).
 */
import WebSocket from "ws";

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] } };
  nodes: number[];
  edges: number[];
  strings: string[];
}

export interface HeapReport {
  usedBytes: number;
  /** Reachable objects of the constructor names asked for. */
  counts: Record<string, number>;
  /** Distinct run ids some reachable string names. */
  runIds: string[];
  /** For a few of them, what keeps each: the closest retainer first. */
  paths: string[];
  /** Every reachable node by type and name (strings and numbers by type only): how many, their own bytes. */
  byName: Record<string, { count: number; bytes: number }>;
  /** What the inspector had kept of the Worker's console since the last report, by text (see `takeConsole`). */
  inspectorConsole: Record<string, number>;
}

interface InspectorMessage {
  id?: number;
  result?: unknown;
  method?: string;
  params?: { chunk?: string; type?: string; exceptionDetails?: { text: string; exception?: { description?: string } } };
}

/** A console message as the inspector reports it: an exception by its text and message, a console call by its kind. */
function consoleKey(msg: InspectorMessage): string | undefined {
  if (msg.method === "Runtime.exceptionThrown") {
    const details = msg.params!.exceptionDetails!;
    const description = details.exception?.description?.split("\n")[0];
    return description && !details.text.includes(description) ? `${details.text} ${description}` : details.text;
  }
  if (msg.method === "Runtime.consoleAPICalled") return `console.${msg.params!.type}`;
}

/** `poke`: any request to the Worker. workerd serves its inspector's messages only while the isolate has work to do. */
export async function connectInspector(port: number, poke: () => Promise<unknown>) {
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json`)).json()) as { title: string; webSocketDebuggerUrl: string }[];
  // Miniflare names the (unnamed) user Worker "core:user:"; its own helpers have other names.
  const target = targets.find((t) => t.title.includes("core:user:"));
  if (!target) throw new Error(`no Worker among the inspector targets: ${targets.map((t) => t.title).join(", ")}`);
  const ws = new WebSocket(target.webSocketDebuggerUrl, { maxPayload: 1 << 30 });
  await new Promise((r, e) => ws.once("open", r).once("error", e));
  let nextId = 0;
  const pending = new Map<number, (result: unknown) => void>();
  let chunks: string[] = [];
  let consoleSeen: Record<string, number> | undefined;
  ws.on("message", (m) => {
    const msg = JSON.parse(String(m)) as InspectorMessage;
    if (msg.id !== undefined) pending.get(msg.id)?.(msg.result);
    if (msg.method === "HeapProfiler.addHeapSnapshotChunk") chunks.push(msg.params!.chunk!);
    const key = consoleSeen && consoleKey(msg);
    if (key) consoleSeen![key] = (consoleSeen![key] ?? 0) + 1;
  });
  const send = async <T>(method: string, params: object = {}): Promise<T> => {
    let answered = false;
    const answer = new Promise<T>((resolve) => {
      const id = ++nextId;
      pending.set(id, (r) => {
        answered = true;
        pending.delete(id);
        resolve(r as T);
      });
      ws.send(JSON.stringify({ id, method, params }));
    });
    // An idle isolate would leave the message unanswered: poke it until the answer comes.
    while (!answered) await Promise.race([answer, new Promise((r) => setTimeout(r, 200)).then(() => answered || poke().catch(() => undefined))]);
    return answer;
  };
  await send("HeapProfiler.enable");

  /**
   * V8's inspector keeps the isolate's last 1000 console messages (V8ConsoleMessageStorage, which also stops at
   * 10 MB), whether or not a client reads them: console calls, and the exceptions workerd reports to it, such as the
   * two `Error: Network connection lost.` of each follower that leaves a run's stream mid-run (made and reported by
   * workerd on finding the client gone, not thrown by the host). Such an exception is held there by an unnamed global
   * handle, so the snapshot counts it as a live `Error`: 2 more per cycle of bench:memory, until that cap. It exists
   * only because workerd runs with an inspector (`npm start` opens none). Enabling Runtime replays what is kept
   * (before its answer): it is counted, then discarded.
   */
  const takeConsole = async () => {
    const seen: Record<string, number> = (consoleSeen = {});
    await send("Runtime.enable");
    await send("Runtime.discardConsoleEntries");
    await send("Runtime.disable");
    consoleSeen = undefined;
    return seen;
  };

  return {
    async report(names: string[], runIdPattern: RegExp, pathsFor = 3): Promise<HeapReport> {
      const inspectorConsole = await takeConsole();
      for (let i = 0; i < 3; i++) await send("HeapProfiler.collectGarbage");
      const { usedSize } = await send<{ usedSize: number }>("Runtime.getHeapUsage");
      chunks = [];
      await send("HeapProfiler.takeHeapSnapshot", { reportProgress: false, captureNumericValue: false });
      const snap = JSON.parse(chunks.join("")) as Snapshot;
      chunks = [];
      return { usedBytes: usedSize, inspectorConsole, ...analyse(snap, names, runIdPattern, pathsFor) };
    },
    close: () => ws.close(),
  };
}

function analyse(snap: Snapshot, names: string[], runIdPattern: RegExp, pathsFor: number) {
  const { node_fields: nf, edge_fields: ef } = snap.snapshot.meta;
  const nodeTypes = snap.snapshot.meta.node_types[0];
  const edgeTypes = snap.snapshot.meta.edge_types[0];
  const [N, E] = [nf.length, ef.length];
  const [typeAt, nameAt, sizeAt, edgeCountAt] = [nf.indexOf("type"), nf.indexOf("name"), nf.indexOf("self_size"), nf.indexOf("edge_count")];
  const [eTypeAt, eNameAt, eToAt] = [ef.indexOf("type"), ef.indexOf("name_or_index"), ef.indexOf("to_node")];
  const count = snap.nodes.length / N;
  const typeOf = (i: number) => nodeTypes[snap.nodes[i * N + typeAt]];
  const nameOf = (i: number) => snap.strings[snap.nodes[i * N + nameAt]];
  const named = (e: number) => !["element", "hidden"].includes(edgeTypes[snap.edges[e * E + eTypeAt]]);
  const firstEdge = new Uint32Array(count + 1);
  for (let i = 0; i < count; i++) firstEdge[i + 1] = firstEdge[i] + snap.nodes[i * N + edgeCountAt];
  const fromOf = new Int32Array(snap.edges.length / E);
  for (let i = 0; i < count; i++) for (let e = firstEdge[i]; e < firstEdge[i + 1]; e++) fromOf[e] = i;

  // Reachable from the root through strong edges, breadth first (so `via` gives a shortest path). V8's string table
  // holds its strings weakly though the snapshot shows it as a root, and the inspector's console buffer (console
  // calls' arguments, named so; `takeConsole` empties it first, exceptions included) exists only because workerd
  // runs with an inspector: neither is a retainer here.
  const reached = new Uint8Array(count);
  const via = new Int32Array(count).fill(-1);
  const queue = [0];
  reached[0] = 1;
  for (let q = 0; q < queue.length; q++) {
    const at = queue[q];
    if (nameOf(at).startsWith("(Internalized strings)")) continue;
    for (let e = firstEdge[at]; e < firstEdge[at + 1]; e++) {
      if (edgeTypes[snap.edges[e * E + eTypeAt]] === "weak") continue;
      if (named(e) && snap.strings[snap.edges[e * E + eNameAt]].includes("DevTools console")) continue;
      const to = snap.edges[e * E + eToAt] / N;
      if (reached[to]) continue;
      reached[to] = 1;
      via[to] = e;
      queue.push(to);
    }
  }

  const wanted = new Set(names);
  const counts: Record<string, number> = Object.fromEntries(names.map((n) => [n, 0]));
  const byName: Record<string, { count: number; bytes: number }> = {};
  const held = new Map<string, number>();
  for (let i = 0; i < count; i++) {
    if (!reached[i]) continue;
    const type = typeOf(i);
    const isString = type === "string" || type === "concatenated string" || type === "sliced string";
    const key = isString || type === "number" ? type : `${type}:${nameOf(i).slice(0, 50)}`;
    const entry = (byName[key] ??= { count: 0, bytes: 0 });
    entry.count++;
    entry.bytes += snap.nodes[i * N + sizeAt];
    if (type === "object" && wanted.has(nameOf(i))) counts[nameOf(i)]++;
    if (isString) for (const m of nameOf(i).matchAll(runIdPattern)) if (!held.has(m[0])) held.set(m[0], i);
  }

  const label = (i: number) => `${typeOf(i)}:${nameOf(i).slice(0, 60)}`;
  const edgeLabel = (e: number) => (named(e) ? `.${snap.strings[snap.edges[e * E + eNameAt]]}` : `[${snap.edges[e * E + eNameAt]}]`);
  const pathOf = (start: number) => {
    const steps: string[] = [];
    for (let at = start; via[at] >= 0 && steps.length < 16; at = fromOf[via[at]]) steps.push(`${label(fromOf[via[at]])}${edgeLabel(via[at])}`);
    return `${label(start)} <- ${steps.join(" <- ")}`;
  };
  const paths = [...held.values()].slice(0, pathsFor).map(pathOf);
  // What keeps the newest nodes of a kind (MEMORY_TRACE="object:Error", say), when a count grows.
  const trace = process.env.MEMORY_TRACE;
  if (trace) {
    const idAt = nf.indexOf("id");
    const matching = [...Array(count).keys()].filter((i) => reached[i] && `${typeOf(i)}:${nameOf(i)}`.startsWith(trace));
    matching.sort((a, b) => snap.nodes[b * N + idAt] - snap.nodes[a * N + idAt]);
    for (const i of matching.slice(0, 4)) console.error(pathOf(i));
  }
  return { counts, runIds: [...held.keys()], paths, byName };
}

/** What grew most between two reports, by own bytes. */
export function growth(before: HeapReport, after: HeapReport, top = 8): Record<string, string> {
  const keys = new Set([...Object.keys(before.byName), ...Object.keys(after.byName)]);
  const delta = [...keys].map((k) => {
    const [a, b] = [before.byName[k] ?? { count: 0, bytes: 0 }, after.byName[k] ?? { count: 0, bytes: 0 }];
    return [k, b.count - a.count, b.bytes - a.bytes] as const;
  });
  const signed = (n: number) => `${n >= 0 ? "+" : ""}${n}`;
  return Object.fromEntries(delta.sort((x, y) => y[2] - x[2]).slice(0, top).map(([k, c, b]) => [k, `${signed(c)} objects, ${signed(b)} bytes`]));
}
