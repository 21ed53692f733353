/**
 * Durable Object storage as SteeringQueue uses it (list by prefix in key order, either way; get; put; delete; the alarm), for unit
 * tests of what workerd cannot be made to do on demand: a clock that steps back, a write that never answers.
 */
export class MemStorage {
  readonly m = new Map<string, unknown>();
  async list<T>({ prefix, limit, reverse }: { prefix: string; limit?: number; reverse?: boolean }): Promise<Map<string, T>> {
    const keys = [...this.m.keys()].filter((k) => k.startsWith(prefix)).sort();
    if (reverse) keys.reverse();
    return new Map(keys.slice(0, limit ?? keys.length).map((k) => [k, structuredClone(this.m.get(k)) as T]));
  }
  async get(key: string | string[]): Promise<unknown> {
    if (!Array.isArray(key)) return structuredClone(this.m.get(key));
    return new Map(key.filter((k) => this.m.has(k)).map((k) => [k, structuredClone(this.m.get(k))]));
  }
  async put(key: string | Record<string, unknown>, value?: unknown) {
    if (typeof key === "string") this.m.set(key, structuredClone(value));
    else for (const [k, v] of Object.entries(key)) this.m.set(k, structuredClone(v));
  }
  alarm: number | null = null;
  async getAlarm() {
    return this.alarm;
  }
  async setAlarm(at: number) {
    this.alarm = at;
  }
  async delete(key: string | string[]) {
    const keys = Array.isArray(key) ? key : [key];
    let n = 0;
    for (const k of keys) if (this.m.delete(k)) n++;
    return Array.isArray(key) ? n : n > 0;
  }
}
