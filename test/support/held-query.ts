import type { LocalHost } from "../../local/host";

/**
 * Hold the Worker's next database request whose SQL (as sent, JSON-escaped: `update \\"agent\\"`) contains `matching`,
 * until `release`: a race made to happen in one order, not waited for. `heldFrom(call)` settles once the call that
 * sends it has it held, so a test lands other calls before it knowing where it stands; the call ending first (refused
 * before it wrote) fails the test at once, with its answer, rather than leaving it to time out.
 */
export function holdNextQuery(host: Pick<LocalHost, "databaseOutage">, matching: string) {
  let release!: () => void;
  const holdUntil = new Promise<void>((r) => (release = r));
  const held = new Promise<void>((onHeld) => host.databaseOutage({ holdUntil, matching, onHeld }));
  const heldFrom = (call: Promise<{ status: number; body: unknown }>): Promise<void> =>
    Promise.race([
      held,
      call.then((answer) => {
        throw new Error(`the call ended (${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}) before its query ${matching} was held`);
      }),
    ]);
  return { heldFrom, release };
}
