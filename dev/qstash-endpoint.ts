import { createHash, createHmac, randomBytes } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import { listen } from "../functions/listen";

/**
 * `npm run dev`'s stand-in for QStash, so the Worker rings its doorbells exactly as deployed:
 * `@upstash/qstash`'s publish (`POST /v2/publish/{destination}`, Bearer token, `Upstash-Not-Before`,
 * `Upstash-Delay`, `Upstash-Deduplication-Id`, `Upstash-Retries`, `Upstash-Method`) is accepted,
 * and each message is delivered to its destination at its time with an `Upstash-Signature` signed
 * as QStash signs (HS256 JWT: iss "Upstash", sub = destination, iat/nbf/exp, jti, body =
 * base64url(sha256(body))), which the Worker's `POST /jobs/run` verifies. A failed delivery is
 * retried with backoff up to the message's retries. Messages live in memory: stopping dev drops
 * them, and the cron sweep's backstop finds their jobs, as after a lost doorbell deployed.
 */
export interface LocalQStash {
  /** QSTASH_URL for the Worker. */
  url: string;
  token: string;
  currentSigningKey: string;
  nextSigningKey: string;
  /** Messages waiting for their time or for a retry. */
  pending(): number;
  close(): Promise<void>;
}

export interface LocalQStashLog {
  error(message: string): void;
}

/** setTimeout's ceiling (~24.8 days); a message due later is dropped (the sweep runs its job). */
const MAX_DELAY_MS = 2_147_483_647;
/** QStash's default retries when a publish names none. */
const DEFAULT_RETRIES = 3;
/** How long a deduplication id is remembered (QStash: 10 minutes after publish). */
const DEDUP_WINDOW_MS = 10 * 60 * 1000;

export function signQStashJwt(secret: string, claims: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const unsigned = `${part({ alg: "HS256", typ: "JWT" })}.${part(claims)}`;
  return `${unsigned}.${createHmac("sha256", secret).update(unsigned).digest("base64url")}`;
}

/** An `Upstash-Signature` for a delivery of `body` to `url`, valid for 5 minutes. */
export function signDelivery(secret: string, url: string, body: string, now = Date.now()): string {
  const iat = Math.floor(now / 1000);
  return signQStashJwt(secret, {
    iss: "Upstash",
    sub: url,
    exp: iat + 300,
    nbf: iat,
    iat,
    jti: `jwt_${randomBytes(12).toString("hex")}`,
    // base64url with its padding, as QStash sends it.
    body: createHash("sha256").update(body).digest("base64").replace(/\+/g, "-").replace(/\//g, "_"),
  });
}

/** `Upstash-Delay` ("30s", "5m", "1h", "2d", or combined "1h30m") in milliseconds. */
export function parseDelay(value: string): number | undefined {
  const unit: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
  if (!/^(\d+[smhd])+$/.test(value)) return undefined;
  let ms = 0;
  for (const m of value.matchAll(/(\d+)([smhd])/g)) ms += Number(m[1]) * unit[m[2]];
  return ms;
}

async function readBody(req: IncomingMessage) {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

interface Message {
  messageId: string;
  destination: string;
  method: string;
  body: string;
  headers: Record<string, string>;
  retries: number;
}

export interface PublishRequest {
  method: string | undefined;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

type Answer = { status: number; payload: unknown };
export type PublishPlan = Answer | { message: Omit<Message, "messageId">; dueAt: number; deduplicationId?: string };

/**
 * What a publish asks for: an answer now (unknown route, wrong token, bad header, a duplicate
 * within the window, which `seen` looks up), or a message to deliver at `dueAt`.
 */
export function publishPlan(
  req: PublishRequest,
  token: string,
  now: number,
  seen: (deduplicationId: string) => string | undefined,
): PublishPlan {
  const { path, body } = req;
  const destination = path.startsWith("/v2/publish/") ? path.slice("/v2/publish/".length) : "";
  if (req.method !== "POST" || !destination)
    return { status: 404, payload: { error: `Unknown route ${req.method} ${path}` } };
  if (req.headers.authorization !== `Bearer ${token}`) return { status: 401, payload: { error: "unauthorized" } };
  if (!/^https?:\/\/[^/]+/.test(destination)) return { status: 400, payload: { error: `invalid destination url` } };
  const header = (name: string) => {
    const value = req.headers[name];
    return typeof value === "string" ? value : undefined;
  };
  const deduplicationId = header("upstash-deduplication-id");
  const existing = deduplicationId ? seen(deduplicationId) : undefined;
  if (existing) return { status: 202, payload: { messageId: existing, url: destination, deduplicated: true } };

  const notBefore = header("upstash-not-before");
  const delay = header("upstash-delay");
  let dueAt = now;
  if (notBefore !== undefined) {
    if (!/^\d+$/.test(notBefore)) return { status: 400, payload: { error: "invalid Upstash-Not-Before header" } };
    dueAt = Number(notBefore) * 1000;
  } else if (delay !== undefined) {
    const ms = parseDelay(delay);
    if (ms === undefined) return { status: 400, payload: { error: "invalid Upstash-Delay header" } };
    dueAt = now + ms;
  }
  const retriesHeader = header("upstash-retries");
  const method = header("upstash-method") ?? "POST";
  const retries = retriesHeader !== undefined && /^\d+$/.test(retriesHeader) ? Number(retriesHeader) : DEFAULT_RETRIES;
  return {
    message: { destination, method, body, headers: forwardedHeaders(req.headers), retries },
    dueAt,
    deduplicationId,
  };
}

/** The `Upstash-Forward-*` headers without their prefix, and the publish's content type. */
function forwardedHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const forwarded: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (name.startsWith("upstash-forward-") && typeof value === "string") {
      forwarded[name.slice("upstash-forward-".length)] = value;
    }
  }
  const contentType = headers["content-type"];
  if (typeof contentType === "string" && contentType) forwarded["content-type"] = contentType;
  return forwarded;
}

/** QStash backs off exponentially between attempts; locally a second, doubling, at most a minute. */
export function retryBackoffMs(attempt: number): number {
  return Math.min(60_000, 1000 * 2 ** attempt);
}

interface Courier {
  closed(): boolean;
  later(ms: number, fn: () => void): void;
  log: LocalQStashLog;
  signingKey: string;
}

async function deliver(courier: Courier, message: Message, attempt: number): Promise<void> {
  if (courier.closed()) return;
  let failure: string;
  try {
    const res = await fetch(message.destination, {
      method: message.method,
      headers: {
        ...message.headers,
        "upstash-message-id": message.messageId,
        "upstash-retried": String(attempt),
        "upstash-signature": signDelivery(courier.signingKey, message.destination, message.body),
        "user-agent": "Upstash-QStash",
      },
      body: message.method === "GET" || message.method === "HEAD" ? undefined : message.body,
    });
    await res.arrayBuffer().catch(() => {});
    if (res.ok) return;
    failure = `answered ${res.status}`;
  } catch (err) {
    failure = String(err);
  }
  if (courier.closed()) return;
  if (attempt >= message.retries) {
    courier.log.error(`delivery to ${message.destination} failed for good (${failure}): ${message.body}`);
    return;
  }
  const backoff = retryBackoffMs(attempt);
  courier.log.error(`delivery to ${message.destination} ${failure}; retry ${attempt + 1} in ${backoff / 1000}s`);
  courier.later(backoff, () => void deliver(courier, message, attempt + 1));
}

function answer(res: ServerResponse, status: number, payload: unknown) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(payload));
}

export async function startLocalQStash(options: { log: LocalQStashLog; port?: number }): Promise<LocalQStash> {
  const token = `qstash_dev_${randomBytes(16).toString("hex")}`;
  const currentSigningKey = `sig_dev_current_${randomBytes(16).toString("hex")}`;
  const nextSigningKey = `sig_dev_next_${randomBytes(16).toString("hex")}`;
  const timers = new Set<ReturnType<typeof setTimeout>>();
  const dedup = new Map<string, { messageId: string; at: number }>();
  let closed = false;
  const courier: Courier = {
    closed: () => closed,
    later: (ms, fn) => {
      if (closed) return;
      const timer = setTimeout(() => {
        timers.delete(timer);
        fn();
      }, ms);
      timers.add(timer);
    },
    log: options.log,
    signingKey: currentSigningKey,
  };

  const server = createServer(async (req, res) => {
    try {
      const body = await readBody(req);
      const now = Date.now();
      for (const [id, entry] of dedup) if (now - entry.at > DEDUP_WINDOW_MS) dedup.delete(id);
      const request = { method: req.method, path: req.url ?? "", headers: req.headers, body };
      const plan = publishPlan(request, token, now, (id) => dedup.get(id)?.messageId);
      if ("status" in plan) return answer(res, plan.status, plan.payload);
      const messageId = `msg_dev_${randomBytes(12).toString("hex")}`;
      if (plan.deduplicationId) dedup.set(plan.deduplicationId, { messageId, at: now });
      const wait = Math.max(0, plan.dueAt - now);
      if (wait <= MAX_DELAY_MS) courier.later(wait, () => void deliver(courier, { messageId, ...plan.message }, 0));
      return answer(res, 201, { messageId, url: plan.message.destination });
    } catch (err) {
      return answer(res, 500, { error: String(err) });
    }
  });

  const port = await listen(server, options.port);
  return {
    url: `http://127.0.0.1:${port}`,
    token,
    currentSigningKey,
    nextSigningKey,
    pending: () => timers.size,
    close: () =>
      new Promise<void>((resolve) => {
        closed = true;
        for (const timer of timers) clearTimeout(timer);
        timers.clear();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
