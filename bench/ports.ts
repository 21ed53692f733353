import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** Listens on a free loopback port; answers it. */
export const listen = (server: Server) => new Promise<number>((r) => server.listen(0, "127.0.0.1", () => r((server.address() as AddressInfo).port)));

/** A loopback port free a moment ago (for a process told its port on its command line: workerd's inspector). */
export async function freePort(): Promise<number> {
  const server = createServer();
  const port = await listen(server);
  await new Promise((r) => server.close(r));
  return port;
}
