import type { Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * Starts `server` on `host` (loopback by default) and resolves to the port it got (`port` 0: a
 * free one). A failure to bind (the port is taken) rejects instead of surfacing as an unhandled
 * `error` event. For the Node.js host (functions/server.ts), and the local stand-ins (dev/) and the
 * test and bench servers.
 */
export async function listen(server: Server, port = 0, host = "127.0.0.1"): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
}
