import { createHash, createHmac, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { listen } from "../../functions/listen";

/**
 * A local stand-in for QStash's publish API, as `@upstash/qstash`'s Client calls it
 * (`POST {baseUrl}/v2/publish/{destination}` with `Authorization: Bearer <token>` and
 * `Upstash-*` headers), and for its deliveries: a recorded message is sent to its destination
 * with an `Upstash-Signature` JWT signed the way QStash signs (HS256 with a signing key; claims
 * iss "Upstash", sub = destination URL, iat/nbf/exp, jti, body = base64url(sha256(raw body))).
 * Nothing is delivered by itself: tests deliver with `deliver`, through whatever reaches the app.
 */
export interface PublishedMessage {
  messageId: string;
  destination: string;
  /** The raw body, exactly as QStash would forward it. */
  body: string;
  contentType: string | undefined;
  method: string;
  /** Upstash-Not-Before: unix seconds. */
  notBefore: number | undefined;
  /** Upstash-Delay, e.g. "30s". */
  delay: string | undefined;
  deduplicationId: string | undefined;
  retries: number | undefined;
  /** Upstash-Forward-* headers, without the prefix (forwarded to the destination). */
  forwardHeaders: Record<string, string>;
  publishedAt: number;
}

export interface PublishCall {
  destination: string;
  status: number;
  headers: Record<string, string>;
}

/** How a delivery reaches the app: `app.request` on Node.js, `dispatchFetch` under Miniflare. */
export type Transport = (url: string, init: RequestInit) => Promise<Response> | Response;

export interface SignOptions {
  /** The destination the token is for (its `sub`). */
  url: string;
  body: string;
  /** Sign with the current (default) or the next signing key, or any other string. */
  key?: "current" | "next" | { secret: string };
  /** Seconds since the epoch the token is issued at (default: now). */
  issuedAt?: number;
  /** Lifetime in seconds (QStash: 5 minutes). */
  ttlSeconds?: number;
  issuer?: string;
}

export interface FakeQStash {
  /** QSTASH_URL for the client. */
  url: string;
  token: string;
  currentSigningKey: string;
  nextSigningKey: string;
  /** Messages accepted and enqueued (duplicates are not enqueued again). */
  messages: PublishedMessage[];
  /** Every publish request answered, including rejected and deduplicated ones. */
  calls: PublishCall[];
  /** The next `times` publishes answer `status` (a QStash outage). */
  fail(failure: { status: number; times: number }): void;
  /** Publishes are received (and recorded) but not answered until the returned function is called. */
  hold(): () => void;
  /** Resolves once `count` messages are enqueued (rings run after the response, so tests wait). */
  waitForMessages(count: number, timeoutMs?: number): Promise<PublishedMessage[]>;
  /** An `Upstash-Signature` value as QStash would send it. */
  sign(options: SignOptions): string;
  /** Deliver a message to its destination (or `overrides.url`) with a signature, as QStash does. */
  deliver(
    message: PublishedMessage,
    transport: Transport,
    overrides?: { key?: SignOptions["key"]; url?: string; signature?: string | null; body?: string },
  ): Promise<Response>;
  reset(): void;
  close(): Promise<void>;
}

const base64url = (data: Buffer | string) => Buffer.from(data).toString("base64url");

/** QStash sends the body hash base64url-encoded with its padding (the Receiver accepts both). */
function bodyHash(body: string) {
  return createHash("sha256").update(body).digest("base64").replace(/\+/g, "-").replace(/\//g, "_");
}

export function signQStashJwt(secret: string, claims: Record<string, unknown>) {
  const header = base64url(JSON.stringify({ alg: "HS256", typ: "JWT" }));
  const payload = base64url(JSON.stringify(claims));
  const signature = createHmac("sha256", secret).update(`${header}.${payload}`).digest("base64url");
  return `${header}.${payload}.${signature}`;
}

async function readBody(req: IncomingMessage) {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

export async function startFakeQStash(
  credentials: { token?: string; currentSigningKey?: string; nextSigningKey?: string } = {},
): Promise<FakeQStash> {
  const dedup = new Map<string, string>();
  let failures: { status: number; times: number }[] = [];
  let gate: Promise<void> | undefined;
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const waiter of waiters) waiter();
  };

  const fake: FakeQStash = {
    url: "",
    token: credentials.token ?? `qstash_${randomBytes(12).toString("hex")}`,
    currentSigningKey: credentials.currentSigningKey ?? `sig_current_${randomBytes(12).toString("hex")}`,
    nextSigningKey: credentials.nextSigningKey ?? `sig_next_${randomBytes(12).toString("hex")}`,
    messages: [],
    calls: [],
    fail: (failure) => failures.push({ ...failure }),
    hold() {
      let release = () => {};
      gate = new Promise<void>((resolve) => {
        release = () => {
          gate = undefined;
          resolve();
        };
      });
      return release;
    },
    waitForMessages(count, timeoutMs = 5_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (fake.messages.length < count) return;
          cleanup();
          resolve(fake.messages.slice(0, count));
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`expected ${count} QStash messages, got ${fake.messages.length}`));
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    },
    sign(options) {
      const secret =
        options.key === "next"
          ? fake.nextSigningKey
          : typeof options.key === "object"
            ? options.key.secret
            : fake.currentSigningKey;
      const iat = options.issuedAt ?? Math.floor(Date.now() / 1000);
      return signQStashJwt(secret, {
        iss: options.issuer ?? "Upstash",
        sub: options.url,
        exp: iat + (options.ttlSeconds ?? 300),
        nbf: iat,
        iat,
        jti: `jwt_${randomBytes(12).toString("hex")}`,
        body: bodyHash(options.body),
      });
    },
    async deliver(message, transport, overrides = {}) {
      const url = overrides.url ?? message.destination;
      const body = overrides.body ?? message.body;
      const headers = new Headers(message.forwardHeaders);
      if (message.contentType) headers.set("content-type", message.contentType);
      headers.set("upstash-message-id", message.messageId);
      headers.set("upstash-retried", "0");
      headers.set("user-agent", "Upstash-QStash");
      const signature =
        overrides.signature === undefined
          ? fake.sign({ url: message.destination, body: message.body, key: overrides.key })
          : overrides.signature;
      if (signature !== null) headers.set("upstash-signature", signature);
      return transport(url, { method: message.method, headers, body });
    },
    reset() {
      fake.messages.length = 0;
      fake.calls.length = 0;
      dedup.clear();
      failures = [];
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };

  const server: Server = createServer(async (req, res) => {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (typeof value === "string") headers[name] = value;
    }
    const path = req.url ?? "";
    const destination = path.startsWith("/v2/publish/") ? path.slice("/v2/publish/".length) : "";
    const body = await readBody(req);
    // Decided (and recorded) at once; answered when no hold is on.
    const send = async (status: number, payload: unknown) => {
      while (gate) await gate;
      fake.calls.push({ destination, status, headers });
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(payload));
    };

    if (req.method !== "POST" || !destination) return send(404, { error: `Unknown route ${req.method} ${path}` });
    if (headers.authorization !== `Bearer ${fake.token}`) return send(401, { error: "unauthorized" });
    if (!/^https?:\/\/[^/]+/.test(destination)) return send(400, { error: `invalid destination url: ${destination}` });
    const failure = failures.find((f) => f.times > 0);
    if (failure) {
      failure.times--;
      return send(failure.status, { error: `Simulated ${failure.status}` });
    }

    const notBefore = headers["upstash-not-before"];
    if (notBefore !== undefined && !/^\d+$/.test(notBefore)) {
      return send(400, { error: "invalid Upstash-Not-Before header: must be a unix timestamp in seconds" });
    }
    const retries = headers["upstash-retries"];
    const deduplicationId = headers["upstash-deduplication-id"];
    const existing = deduplicationId ? dedup.get(deduplicationId) : undefined;
    // QStash accepts a duplicate, does not enqueue it, and answers 202 with the first message's id.
    if (existing) return send(202, { messageId: existing, url: destination, deduplicated: true });

    const messageId = `msg_${randomBytes(16).toString("hex")}`;
    if (deduplicationId) dedup.set(deduplicationId, messageId);
    const forwardHeaders: Record<string, string> = {};
    for (const [name, value] of Object.entries(headers)) {
      if (name.startsWith("upstash-forward-")) forwardHeaders[name.slice("upstash-forward-".length)] = value;
    }
    fake.messages.push({
      messageId,
      destination,
      body,
      contentType: headers["content-type"],
      method: headers["upstash-method"] ?? "POST",
      notBefore: notBefore === undefined ? undefined : Number(notBefore),
      delay: headers["upstash-delay"],
      deduplicationId,
      retries: retries === undefined ? undefined : Number(retries),
      forwardHeaders,
      publishedAt: Date.now(),
    });
    notify();
    return send(201, { messageId, url: destination });
  });

  fake.url = `http://127.0.0.1:${await listen(server)}`;
  return fake;
}
