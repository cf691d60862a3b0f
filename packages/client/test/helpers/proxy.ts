import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** What the proxy does with the next request it matches. */
export type Fault =
  | { kind: "status"; status: number; retryAfter?: string; body?: string }
  /** The connection is cut before the request reaches the service. */
  | { kind: "reset" }
  /** The request reaches the service; its answer is lost (the connection is cut instead). */
  | { kind: "lose-answer" }
  /** The request is held this long before it is forwarded. */
  | { kind: "delay"; ms: number }
  /** The request reaches the service; its answer comes back with its status but an HTML body (a proxy's page). */
  | { kind: "garble" }
  /** The request reaches the service; its status, headers and first chunk reach the client, then the connection is cut. */
  | { kind: "cut-after-start" };

export interface Seen {
  method: string;
  path: string;
  idempotencyKey?: string;
  /** The status the client got (0: none, the connection was cut). */
  status: number;
  replayed: boolean;
}

/**
 * A real HTTP proxy in front of the service: it forwards every request unchanged, except the
 * ones a test queues a fault for (a 503 or 429, a reset connection, a lost answer, a delay),
 * and records what passed. The client's retries are tested through it at the network boundary.
 */
export async function startFaultProxy(target: string) {
  const faults: { match: (method: string, path: string) => boolean; fault: Fault }[] = [];
  const seen: Seen[] = [];
  const server = createServer(async (req, res) => {
    const method = req.method ?? "GET";
    const path = req.url ?? "/";
    const record: Seen = {
      method,
      path,
      idempotencyKey: req.headers["idempotency-key"] as string | undefined,
      status: 0,
      replayed: false,
    };
    seen.push(record);
    const index = faults.findIndex((f) => f.match(method, path));
    const fault = index >= 0 ? faults.splice(index, 1)[0].fault : undefined;
    if (fault?.kind === "status") {
      record.status = fault.status;
      res.writeHead(fault.status, {
        "content-type": fault.body ? "text/html" : "application/json",
        ...(fault.retryAfter ? { "retry-after": fault.retryAfter } : {}),
      });
      res.end(fault.body ?? JSON.stringify({ error: "Service Unavailable (proxy)" }));
      return;
    }
    if (fault?.kind === "reset") {
      req.socket.destroy();
      return;
    }
    if (fault?.kind === "delay") await new Promise((r) => setTimeout(r, fault.ms));
    if (req.destroyed) return;
    forward(target, req, res, record, fault?.kind);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    /** Queue a fault for the next request whose method and path start as given. */
    fail(method: string, pathPrefix: string, fault: Fault) {
      faults.push({ match: (m, p) => m === method && p.startsWith(pathPrefix), fault });
    },
    /** Drops the faults still queued. */
    clear() {
      faults.length = 0;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function forward(target: string, req: IncomingMessage, res: ServerResponse, record: Seen, fault?: Fault["kind"]) {
  const url = new URL(req.url ?? "/", target);
  const upstream = httpRequest(url, { method: req.method, headers: { ...req.headers, host: url.host } }, (answer) => {
    record.replayed = answer.headers["idempotent-replayed"] === "true";
    if (fault === "garble") {
      answer.resume();
      record.status = answer.statusCode ?? 0;
      res.writeHead(answer.statusCode ?? 502, { "content-type": "text/html" });
      res.end("<html>Welcome to the hotel network</html>");
      return;
    }
    if (fault === "lose-answer") {
      // The service has done the work; the client never hears of it.
      answer.resume();
      answer.on("end", () => req.socket.destroy());
      return;
    }
    record.status = answer.statusCode ?? 0;
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    if (fault === "cut-after-start") {
      answer.once("data", (chunk) => {
        answer.pause();
        res.write(chunk, () => {
          answer.destroy();
          req.socket.destroy();
        });
      });
      return;
    }
    answer.pipe(res);
  });
  upstream.on("error", () => res.destroy());
  req.pipe(upstream);
}
