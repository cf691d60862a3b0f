import { createServer, type IncomingMessage, type Server, type ServerResponse, STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import { getRequestListener } from "@hono/node-server";
import { MAX_BODY_BYTES } from "./app";

type FetchCallback = Parameters<typeof getRequestListener>[0];
type RequestListener = (incoming: IncomingMessage, outgoing: ServerResponse) => unknown;

/** Node's own default for receiving a whole request; raised only when the headers timeout is longer. */
const NODE_REQUEST_TIMEOUT_MS = 300_000;

export interface NodeHostOptions {
  /** The app's fetch handler. */
  fetch: FetchCallback;
  /** The host the server listens on: a request without a Host header is taken as addressed to it. */
  hostname?: string;
  /** How long an idle keep-alive connection is kept (Node's own default, 5 s, is below common proxies' 60 s). */
  keepAliveTimeoutMs: number;
  /** How long a client may take to send a request's headers. */
  headersTimeoutMs: number;
  /** Unread request bodies up to this size are drained to keep the connection (default: the body limit, 1 MB). */
  maxDrainBytes?: number;
  /** A body being drained that has not ended after this long has its connection closed. */
  drainTimeoutMs?: number;
}

/**
 * The Node.js host's HTTP server: the app behind @hono/node-server's request listener, wrapped so
 * that an answer sent before its request's body was read never leaves a broken keep-alive
 * connection behind (`keepConnectionsUsable`), with keep-alive and header timeouts above common
 * proxies' idle timeouts. Not yet listening.
 */
export function createNodeServer(options: NodeHostOptions): Server {
  // The listener's own clean-up (autoCleanupIncoming) is off: it gives an unread body 500 ms to
  // drain and then destroys the socket, while the response has already promised keep-alive. And
  // once the app has touched the body (the body limit does), the stream adapter behind it pauses
  // the body again, so the drain stalls and the connection is destroyed under the client.
  const listener = getRequestListener(options.fetch, { hostname: options.hostname, autoCleanupIncoming: false });
  const server = createServer(
    {
      keepAliveTimeout: options.keepAliveTimeoutMs,
      headersTimeout: options.headersTimeoutMs,
      // Node requires headersTimeout <= requestTimeout.
      requestTimeout: Math.max(NODE_REQUEST_TIMEOUT_MS, options.headersTimeoutMs),
    },
    keepConnectionsUsable(listener, {
      maxDrainBytes: options.maxDrainBytes ?? MAX_BODY_BYTES,
      drainTimeoutMs: options.drainTimeoutMs ?? 10_000,
    }),
  );
  server.on("clientError", answerClientError);
  const responses = new Set<ServerResponse>();
  inFlight.set(server, responses);
  server.on("request", (_incoming: IncomingMessage, outgoing: ServerResponse) => {
    responses.add(outgoing);
    outgoing.once("close", () => responses.delete(outgoing));
    if (closing.has(server) && !outgoing.headersSent) outgoing.setHeader("connection", "close");
  });
  return server;
}

/** Each server's responses not yet finished, and the servers that are stopping. */
const inFlight = new WeakMap<Server, Set<ServerResponse>>();
const closing = new WeakSet<Server>();

/**
 * A stopping server's keep-alive connections end with the response they carry: every response from
 * now on says `Connection: close`, and one already sent closes its connection as it finishes.
 * `server.close()` closes only the connections idle at that moment, so a pooling client's busy
 * connection took new requests through the whole grace and was then cut under one, leaving the
 * client unable to tell whether its write ran.
 */
export function closeConnectionsAsResponsesEnd(server: Server): void {
  closing.add(server);
  for (const response of inFlight.get(server) ?? []) {
    if (!response.headersSent) response.setHeader("connection", "close");
    else response.once("finish", () => server.closeIdleConnections());
  }
  server.closeIdleConnections();
}

/**
 * A request Node's parser refuses before the app sees it: a request line or headers over Node's
 * 16 KB (431), a request that is not HTTP (400), one too slow to arrive (408). Node's own answer
 * has an empty body; this one has the `{error}` body every other refusal has.
 */
export function clientErrorAnswer(code: string | undefined): { status: number; error: string } {
  switch (code) {
    case "HPE_HEADER_OVERFLOW":
      return { status: 431, error: "Request headers too large (limit 16 KB, the URL included)" };
    case "HPE_CHUNK_EXTENSIONS_OVERFLOW":
      return { status: 413, error: "Request body too large (its chunk extensions)" };
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return { status: 408, error: "Request timeout: the request did not arrive in time" };
    default:
      return { status: 400, error: "Bad request: not a valid HTTP request" };
  }
}

function answerClientError(err: NodeJS.ErrnoException, socket: Duplex) {
  // As Node's own handler: no answer on a reset connection, or over a response already started.
  const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (err.code === "ECONNRESET" || !socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  const { status, error } = clientErrorAnswer(err.code);
  const body = JSON.stringify({ error });
  // Closed once written, as Node's own answer is: a client that never closes its side would
  // otherwise hold the refused socket open.
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    () => socket.destroy(),
  );
}

/**
 * A request may be answered before its body has been read: a 401, a 413 from its declared
 * length, a 404 for an unknown route. On a keep-alive connection the rest of that body still
 * arrives and must be consumed before the next request on the connection can be read, so:
 *
 * - when the response head is written and the body has not fully arrived, a body whose declared
 *   length is within `maxDrainBytes` keeps the connection; a longer one, or one without a
 *   declared length (chunked), gets `Connection: close`: the client opens a new connection for
 *   its next request instead of losing it on this one;
 * - once the response is finished, whatever is left of the body is read and discarded (nothing
 *   reads it any more: the app is done with the request). A drain that goes past `maxDrainBytes`
 *   or takes longer than `drainTimeoutMs` closes the connection; the client is then still sending
 *   that body, so no later request of its is on the connection yet.
 */
export function keepConnectionsUsable(
  listener: RequestListener,
  options: { maxDrainBytes: number; drainTimeoutMs: number },
): RequestListener {
  return (incoming, outgoing) => {
    const writeHead = outgoing.writeHead as (this: ServerResponse, ...args: unknown[]) => ServerResponse;
    outgoing.writeHead = function writeHeadKeepingConnectionsUsable(this: ServerResponse, ...args: unknown[]) {
      if (!incoming.complete && !drainable(incoming, options.maxDrainBytes) && !this.headersSent) {
        this.setHeader("Connection", "close");
      }
      return writeHead.apply(this, args);
    } as ServerResponse["writeHead"];
    outgoing.once("finish", () => discardUnreadBody(incoming, options));
    return listener(incoming, outgoing);
  };
}

/** A body of a declared length within the bound; a chunked one has none. */
function drainable(incoming: IncomingMessage, maxDrainBytes: number): boolean {
  if (incoming.headers["transfer-encoding"] !== undefined) return false;
  const declared = Number(incoming.headers["content-length"] ?? 0);
  return Number.isSafeInteger(declared) && declared <= maxDrainBytes;
}

function discardUnreadBody(incoming: IncomingMessage, options: { maxDrainBytes: number; drainTimeoutMs: number }) {
  if (incoming.readableEnded || incoming.destroyed) return;
  const close = () => {
    clearTimeout(timer);
    incoming.socket?.destroy();
  };
  const timer = setTimeout(close, options.drainTimeoutMs);
  timer.unref();
  // The body stream handed to the app (a web stream over this one) would pause it again as soon
  // as its queue is full; nobody reads it any more, so its listeners go and the bytes are dropped.
  incoming.removeAllListeners("data");
  let bytes = 0;
  incoming.on("data", (chunk: Buffer) => {
    bytes += chunk.length;
    if (bytes > options.maxDrainBytes) close();
  });
  incoming.once("end", () => clearTimeout(timer));
  incoming.once("close", () => clearTimeout(timer));
  incoming.resume();
}
