import { type OpenAPIHono, z } from "@hono/zod-openapi";
import { createMiddleware } from "hono/factory";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode, StatusCode } from "hono/utils/http-status";
import type { Deps } from "../lib/deps";
import { heartbeat } from "../lib/heartbeat";
import {
  answerScope,
  CLAIM_LEASE_MS,
  CLAIM_RENEW_MS,
  type Claim,
  claimKey,
  IDEMPOTENCY_HEADER,
  MAX_KEY_LENGTH,
  parseIdempotencyKey,
  REPLAYED_HEADER,
  releaseKey,
  renewClaim,
  requestFingerprint,
  type StoredResponse,
  storeResponse,
} from "../lib/idempotency";
import { errorFields } from "../lib/log";
import type { AppEnv } from "./env";
import { failureMessage } from "./errors";
import { ErrorSchema, errorResponses } from "./schemas/errors";
import { jsonResponse } from "./schemas/http";

/** The methods the header applies to (GET is safe and is answered afresh). */
const WRITE_METHODS = new Set(["POST", "PATCH", "DELETE"]);

const MISMATCH = `This ${IDEMPOTENCY_HEADER} was used for a different request (method, path or body)`;
const RUNNING = `A request with this ${IDEMPOTENCY_HEADER} is still being processed; retry later`;

/**
 * `Idempotency-Key` on `/v1` writes (lib/idempotency.ts). Registered after authentication, the NUL
 * check and the body limit, so a bad credential is a 401, an oversized body a 413, and neither
 * touches a key. Without the header nothing here runs.
 *
 * - The first request claims the key (one statement), runs, and its answer is stored (one
 *   statement): 2xx and 4xx are stored; a 5xx, an exception or a request refused for its input
 *   (a validation error, malformed JSON, a wrong content type: it never ran) releases the key,
 *   so a retry, or the corrected request, runs. A 5xx after the request wrote (chat, whose user
 *   message is stored before the model call) is stored too: run again, it would write twice.
 * - A chat stores its user message before its model call and records it on the claim: if its
 *   process dies, the request that takes the claim over (after the lease) answers the chat's 500
 *   and keeps it, instead of storing the message again.
 * - A repeat with the same method, path and body gets the stored status and body with
 *   `Idempotent-Replayed: true` and writes nothing; a different request with the key is 422; a
 *   repeat while the first runs is 409 with `Retry-After: 1`.
 * - A streamed answer (chat with `Accept: text/event-stream`) holds the key while it streams (a
 *   repeat meanwhile is 409). Once it ends, the events the route gives as its replay are kept
 *   (`streamReplay`: a chat's start, its text as one delta, and its done or error), so a repeat
 *   gets them instead of storing the user message again.
 */
export const idempotencyKeys = createMiddleware<AppEnv>(async function idempotencyKeys(c, next) {
  const header = c.req.header(IDEMPOTENCY_HEADER);
  const principal = c.get("apiKey");
  if (header === undefined || !WRITE_METHODS.has(c.req.method) || !principal) return next();
  const key = parseIdempotencyKey(header);
  const deps = c.get("deps");
  const url = new URL(c.req.url);
  // A copy of the body: the route's own validation reads the request as it came.
  const body = c.req.raw.body ? new Uint8Array(await c.req.raw.clone().arrayBuffer()) : new Uint8Array(0);
  const outcome = await claimKey(deps, {
    projectId: principal.projectId,
    key,
    fingerprint: requestFingerprint(c.req.method, url.pathname + url.search, body),
    scope: answerScope(c.req.method, url.pathname, body),
  });
  if (outcome.kind === "replay") {
    const { status, body: stored, contentType } = outcome.response;
    const headers: Record<string, string> = { [REPLAYED_HEADER]: "true" };
    if (contentType) headers["Content-Type"] = contentType;
    return stored === ""
      ? c.body(null, status as StatusCode, headers)
      : c.body(stored, status as ContentfulStatusCode, headers);
  }
  // Hono's own exception takes the one error path (onError) with any status: `{error}`.
  if (outcome.kind === "mismatch") throw new HTTPException(422, { message: MISMATCH });
  if (outcome.kind === "running") return c.json({ error: RUNNING }, 409, { "Retry-After": "1" });

  const { claim } = outcome;
  if (outcome.takenOver) deps.log.info("idempotency key taken over (expired, or its holder died)", { key });
  if (outcome.holderWrote) {
    // Its holder died after writing (a chat's user message): run again, the request would write
    // twice. It answers what the holder would have answered on failing, kept like it.
    const failed = { status: 500, body: JSON.stringify({ error: failureMessage(c) }), contentType: "application/json" };
    await storeResponse(deps, claim, failed);
    return c.body(failed.body, 500, { "Content-Type": failed.contentType });
  }
  c.set("idempotencyClaim", claim);
  const lease = keepClaim(deps, claim);
  // Frees the key so a retry runs anew; a failure to free it only delays that to the lease's end.
  const release = () =>
    lease
      .stop()
      .then(() => releaseKey(deps, claim))
      .catch((e) => deps.log.warn("could not release an idempotency key", errorFields(e)));
  try {
    await next();
  } catch (err) {
    await release();
    throw err;
  }
  const res = c.res;
  // A request that wrote keeps its answer whatever it is: run again, it would write twice.
  if (!c.get("wroteBeforeFailing") && (res.status >= 500 || c.get("inputRefused"))) {
    await release();
    return;
  }
  const contentType = res.headers.get("content-type");
  const keep = async (answer: StoredResponse) => {
    await lease.stop();
    try {
      await storeResponse(deps, claim, answer);
    } catch (err) {
      // The write itself is done and answered; a retry after the lease runs out would run it again
      // (a chat's, having recorded its stored message, would answer the chat's 500).
      deps.log.error("could not store an idempotent response", { key, ...errorFields(err) });
    }
  };
  if (res.body && !/^application\/json\b/i.test(contentType ?? "")) {
    // A stream: held while it flows. Then its replay is kept (a chat's, which wrote), or the key
    // is released (a stream without one).
    const replay = c.get("streamReplay");
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    deps.defer(
      res.body
        .pipeTo(writable)
        .catch(() => {})
        .then(async () =>
          replay ? keep({ status: res.status, body: await replay, contentType: "text/event-stream" }) : release(),
        ),
    );
    c.res = new Response(readable, res);
    return;
  }
  await keep({ status: res.status, body: res.body ? await res.clone().text() : "", contentType });
});

/** Renews the claim's lease while its request runs, so only a dead holder's claim is taken over. */
function keepClaim(deps: Deps, claim: Claim) {
  return heartbeat(
    CLAIM_RENEW_MS,
    () => renewClaim(deps, claim),
    (err) => deps.log.warn("idempotency key lease renewal failed", errorFields(err)),
  );
}

const headerSchema = z.object({
  [IDEMPOTENCY_HEADER]: z
    .string()
    .min(1)
    .max(MAX_KEY_LENGTH)
    .optional()
    .openapi({
      description: `Makes a retry of this write safe (IETF httpapi Idempotency-Key draft): 1-${MAX_KEY_LENGTH} printable ASCII characters (bare or as a quoted structured-field string; one header, a bare value with a comma is two and refused), e.g. a UUID; scoped to the project. The first answer (2xx or 4xx) is kept for 24 hours (IDEMPOTENCY_TTL_MS); the same request again gets it back with \`Idempotent-Replayed: true\` and writes nothing; a different request with the key is 422, a repeat while the first runs 409 with \`Retry-After: 1\` (a claim left by a dead process is taken over after ${CLAIM_LEASE_MS / 1000} s; a chat's that had stored its user message then answers its 500, kept). A 5xx, or a request refused for its input (400 Validation error, malformed JSON, 415), frees the key, so the corrected request runs under it, except a chat's 5xx after its user message was stored, which is kept like any answer. A streamed chat (\`text/event-stream\`) holds the key while it streams, then its events are kept: a repeat gets its \`start\`, its text as one \`delta\` and its \`done\`, or \`error\` if it failed or its client left before the reply was stored.`,
      example: "3f1c9a52-7d1e-4b8a-9c5e-0a2b6d4e8f10",
    }),
});

/**
 * Documents the header, and the 409 and 422 it can answer (and its 400), on every `/v1` write in
 * the app's OpenAPI registry. Call after the `/v1` routes are mounted and before the document is
 * served; the routes' own definitions are untouched (the app holds copies).
 */
export function documentIdempotencyKeys(app: OpenAPIHono<AppEnv>) {
  for (const def of app.openAPIRegistry.definitions) {
    if (def.type !== "route") continue;
    const route = def.route;
    if (!WRITE_METHODS.has(route.method.toUpperCase()) || !route.path.startsWith("/v1/")) continue;
    const existing = route.request?.headers;
    route.request = {
      ...route.request,
      headers: existing ? [...(Array.isArray(existing) ? existing : [existing]), headerSchema] : headerSchema,
    };
    route.responses = {
      ...route.responses,
      400: route.responses[400] ?? errorResponses[400],
      409: jsonResponse(
        ErrorSchema,
        `A request with this ${IDEMPOTENCY_HEADER} is still being processed; retry after its \`Retry-After\` (1 s)`,
      ),
      422: jsonResponse(ErrorSchema, `This ${IDEMPOTENCY_HEADER} was used for a different request`),
    };
  }
}
