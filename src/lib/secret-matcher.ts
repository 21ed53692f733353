/**
 * Finds secrets in text as it was sent, in one pass: an Aho–Corasick automaton over UTF-16 code units (as `indexOf`
 * matches), built once for a set of fragments. Reading a text costs one step per code unit, whatever the number of
 * fragments, and allocates nothing; each step tells the longest fragment that ends there and how much of what was read
 * may still be the start of one (what a cut text or a stream holds back).
 */

/** The automaton's start: nothing read that begins a fragment. */
export const START = 0;

/** A code unit with no edge out of a node. */
const NONE = -1;

export class SecretMatcher {
  /** The longest fragment's length (0 for none): the most any match reaches back. */
  readonly longest: number;
  /**
   * Each node is a prefix of some fragment (START the empty one), numbered as built. A node's only (or first) edge: its
   * code unit and the node it leads to.
   */
  private readonly edgeUnit: Int32Array;
  private readonly edgeNode: Int32Array;
  /** Every edge of a node with more than one (START's, mostly), by code unit. */
  private readonly branches = new Map<number, Map<number, number>>();
  /** The longest proper suffix of a node's prefix that is a node too (Aho–Corasick's failure link). */
  private readonly fail: Int32Array;
  /** The longest fragment that is a suffix of a node's prefix (0 for none). */
  private readonly matched: Int32Array;
  /** The longest suffix of a node's prefix that is a proper prefix of a fragment (0 for none). */
  private readonly held: Int32Array;
  /** The code units a fragment begins with, as bits: most of a text is read at START by this test alone. */
  private readonly starts = new Uint8Array(0x10000 >> 3);
  /** The fragments reversed, built when a text cut at its start is first read (`heldAtStart`). */
  private reversed: SecretMatcher | undefined;

  constructor(private readonly fragments: readonly string[]) {
    const units = fragments.reduce((sum, f) => sum + f.length, 0);
    /** How long each node's prefix is: only building needs it. */
    const depth = new Int32Array(units + 1);
    this.edgeUnit = new Int32Array(units + 1).fill(NONE);
    this.edgeNode = new Int32Array(units + 1);
    this.fail = new Int32Array(units + 1);
    this.matched = new Int32Array(units + 1);
    this.held = new Int32Array(units + 1);
    let nodes = 1;
    let longest = 0;
    for (const fragment of fragments) {
      let node = START;
      for (let i = 0; i < fragment.length; i++) {
        const unit = fragment.charCodeAt(i);
        let next = this.edge(node, unit);
        if (next === NONE) {
          next = nodes++;
          depth[next] = i + 1;
          this.addEdge(node, unit, next);
        }
        node = next;
      }
      if (fragment.length) this.matched[node] = fragment.length;
      longest = Math.max(longest, fragment.length);
    }
    this.longest = longest;
    this.link(nodes, depth);
  }

  /** The node after reading `unit` at `node`. */
  step(node: number, unit: number): number {
    if (node === START && !((this.starts[unit >> 3] >> (unit & 7)) & 1)) return START;
    for (;;) {
      const next = this.edge(node, unit);
      if (next !== NONE) return next;
      if (node === START) return START;
      node = this.fail[node];
    }
  }

  /** The length of the longest fragment that ends with what was read to reach `node` (0 when none does). */
  matchedAt(node: number): number {
    return this.matched[node];
  }

  /** How many of the last units read to reach `node` may be the start of a fragment, not yet whole. */
  heldAt(node: number): number {
    return this.held[node];
  }

  /** Whether any fragment occurs in `text`. */
  occursIn(text: string): boolean {
    return this.firstAt(text) >= 0;
  }

  /**
   * Where the first fragment in `text` begins (-1 when none does), found by the engine's own string search: most texts
   * hold no secret, and are then not read unit by unit at all. One search of `text` per fragment.
   */
  firstAt(text: string): number {
    let first = -1;
    // Indexed, not for-of: an array iterator is an allocation until the optimising compiler removes it.
    for (let i = 0; i < this.fragments.length; i++) {
      const f = this.fragments[i];
      const at = f ? text.indexOf(f) : -1;
      if (at >= 0 && (first < 0 || at < first)) first = at;
    }
    return first;
  }

  /** The longest head of `text` that may be the end of a fragment begun before it (a text cut at its start): 0 when none. */
  heldAtStart(text: string): number {
    if (!this.longest) return 0;
    this.reversed ??= new SecretMatcher(this.fragments.map((f) => f.split("").reverse().join("")));
    let node = START;
    // Read backwards from as far in as such a head can reach.
    for (let i = Math.min(text.length, this.longest) - 1; i >= 0; i--) node = this.reversed.step(node, text.charCodeAt(i));
    return this.reversed.heldAt(node);
  }

  /** Whether `text` lies inside a fragment with more of it on both sides (a text cut at both ends may be all secret). */
  within(text: string): boolean {
    return this.fragments.some((f) => {
      const at = f.indexOf(text, 1);
      return text.length > 0 && at > 0 && at + text.length < f.length;
    });
  }

  private edge(node: number, unit: number): number {
    if (this.edgeUnit[node] === unit) return this.edgeNode[node];
    return this.branches.get(node)?.get(unit) ?? NONE;
  }

  private addEdge(node: number, unit: number, next: number) {
    if (node === START) this.starts[unit >> 3] |= 1 << (unit & 7);
    if (this.edgeUnit[node] === NONE) {
      this.edgeUnit[node] = unit;
      this.edgeNode[node] = next;
      return;
    }
    let all = this.branches.get(node);
    if (!all) this.branches.set(node, (all = new Map([[this.edgeUnit[node], this.edgeNode[node]]])));
    all.set(unit, next);
  }

  /** Failure links, and what each node matches and holds, breadth first (a node's link is shallower than it). */
  private link(nodes: number, depth: Int32Array) {
    const queue = new Int32Array(nodes);
    let read = 0;
    let written = 0;
    const visit = (node: number, unit: number, next: number) => {
      if (node !== START) {
        let back = this.fail[node];
        for (;;) {
          const to = this.edge(back, unit);
          if (to !== NONE) {
            this.fail[next] = to;
            break;
          }
          if (back === START) break;
          back = this.fail[back];
        }
      }
      // A fragment of its own is the longest that ends here; otherwise the longest its link's prefix ends with.
      if (!this.matched[next]) this.matched[next] = this.matched[this.fail[next]];
      queue[written++] = next;
    };
    const hasEdges = (node: number) => this.edgeUnit[node] !== NONE;
    for (queue[written++] = START; read < written; ) {
      const node = queue[read++];
      // A prefix with edges out may grow into a fragment; one without is a whole fragment and holds what its link holds.
      if (node !== START) this.held[node] = hasEdges(node) ? depth[node] : this.held[this.fail[node]];
      const all = this.branches.get(node);
      if (all) for (const [unit, next] of all) visit(node, unit, next);
      else if (hasEdges(node)) visit(node, this.edgeUnit[node], this.edgeNode[node]);
    }
  }
}

/** Matchers by the fragment list they were built for: a resource's list is made once and scrubs many texts. */
const built = new WeakMap<readonly string[], SecretMatcher>();

/** The matcher for `fragments` (a list never changed once made), built on first use. */
export function matcherOf(fragments: readonly string[]): SecretMatcher {
  let matcher = built.get(fragments);
  if (!matcher) built.set(fragments, (matcher = new SecretMatcher(fragments)));
  return matcher;
}
