import { createHash, randomBytes } from "node:crypto";
import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import { countDeleted, drainInBatches } from "./db/batches";
import { commitWithoutFlush } from "./db/commit";
import { dbInt, parsedRowsOf, rowsOf } from "./db/rows";
import { episodes, idempotencyKeys, threads } from "./db/schema";
import type { Deps } from "./deps";
import { withoutLoneSurrogates } from "./inputs";

/**
 * Idempotency keys (IETF httpapi draft "The Idempotency-Key HTTP Header Field"): a client sends
 * `Idempotency-Key` on a `/v1` write; the first answer is stored per (project, key) with a
 * fingerprint of the request, and a repeat gets that answer again instead of a second write.
 *
 * Statements: a keyed request that runs costs two beyond its own (the claim before it, the stored
 * answer after it); a replay, a mismatch (422) or a repeat while the first runs (409) costs the
 * claim alone and writes nothing. A keyed chat records its stored user message on the claim in
 * the message's own statement (`claimWroteSql`).
 */

export const IDEMPOTENCY_HEADER = "Idempotency-Key";
export const REPLAYED_HEADER = "Idempotent-Replayed";
export const MAX_KEY_LENGTH = 255;
/**
 * A running claim's lease: renewed every `CLAIM_RENEW_MS` while its request runs, so a claim whose
 * lease ran out belongs to a process that died mid-request and the next repeat takes it over.
 */
export const CLAIM_LEASE_MS = 60_000;
export const CLAIM_RENEW_MS = 20_000;

/**
 * The header is a Structured Field string in the draft (`Idempotency-Key: "8e03978e-…"`); a bare
 * value is taken as it is, so `"abc"` and `abc` are the same key. 1-255 printable ASCII characters.
 */
const keySchema = z.object({
  [IDEMPOTENCY_HEADER]: z
    .string()
    .min(1, "Must not be empty")
    .max(MAX_KEY_LENGTH, `At most ${MAX_KEY_LENGTH} characters`)
    .regex(/^[\x20-\x7e]*$/, "Only printable ASCII characters (0x20-0x7E)"),
});

/**
 * The key a header value names; a ZodError (a 400 naming the header) when it is not a valid one. A
 * bare value with a comma is two header lines joined (HTTP joins repeated fields so): the draft's
 * key is one string, and taking the pair as a third key would match neither.
 */
export function parseIdempotencyKey(value: string): string {
  const quoted = /^"(?:[^"\\]|\\["\\])*"$/.test(value);
  const unquoted = quoted ? value.slice(1, -1).replace(/\\(["\\])/g, "$1") : value;
  const header = keySchema
    .refine((v) => quoted || !v[IDEMPOTENCY_HEADER].includes(","), {
      message: "One key only: send the header once (a comma joins two values)",
      path: [IDEMPOTENCY_HEADER],
    })
    .parse({ [IDEMPOTENCY_HEADER]: unquoted });
  return header[IDEMPOTENCY_HEADER];
}

/** SHA-256 of the method, the path with its query string, and the body's bytes. */
export function requestFingerprint(method: string, pathAndQuery: string, body: Uint8Array): string {
  return createHash("sha256").update(`${method}\n${pathAndQuery}\n`).update(body).digest("hex");
}

/**
 * What a keyed request names that its stored answer may quote: datasets (a `{dataset}` path
 * segment or a `dataset` in the body), threads (a `threads/{id}` segment, or the `threadId`s of
 * the cross-thread batch's messages) and episodes (`episodes/{id}`). The claim turns them into
 * the datasets it records, so erasing a dataset deletes the answers that may quote it, and the
 * claims of requests still running (their answers are then not stored). The body is read only
 * when the path names nothing (the thread routes' bodies are not parsed twice; the cross-thread
 * batch's and a thread create's are).
 */
export interface AnswerScope {
  datasets: string[];
  threadIds: string[];
  episodeIds: string[];
}

/**
 * The most batch items whose threads a claim names: the batch route refuses more (its 400), and
 * the scope of a refused request does not matter. Read whole, a 5 MB body of 200,000 items held
 * the event loop for half a minute before that 400.
 */
const SCOPED_ITEMS_MAX = 1_000;

export function answerScope(method: string, pathname: string, body: Uint8Array): AnswerScope {
  const scope = { datasets: new Set<string>(), threadIds: new Set<string>(), episodeIds: new Set<string>() };
  const done = (): AnswerScope => ({
    datasets: [...scope.datasets],
    threadIds: [...scope.threadIds],
    episodeIds: [...scope.episodeIds],
  });
  // The erase itself: its answer holds counts only, and its claim, running while it erases, is
  // not one of the answers it deletes.
  if (method === "DELETE" && ERASE_PATH.test(pathname)) return done();
  const add = (names: Set<string>, value: unknown) => {
    const name = asStored(value);
    if (name !== undefined) names.add(name);
  };
  const segments = pathname.split("/").map(decodedSegment);
  segments.forEach((segment, i) => {
    const next = segments[i + 1];
    if (!next) return;
    if (segment === "datasets") add(scope.datasets, next);
    else if (segment === "threads") add(scope.threadIds, next);
    else if (segment === "episodes") add(scope.episodeIds, next);
  });
  if (scope.datasets.size + scope.threadIds.size + scope.episodeIds.size > 0 || body.length === 0) return done();
  const json = parsedBody(body);
  add(scope.datasets, json?.dataset);
  if (Array.isArray(json?.messages) && json.messages.length <= SCOPED_ITEMS_MAX) {
    for (const m of json.messages) add(scope.threadIds, (m as { threadId?: unknown } | null)?.threadId);
  }
  return done();
}

/**
 * A name from the request as the route stores it (lone surrogates as U+FFFD), or none when the
 * route will refuse it (not a string, or a NUL: `text()`). Taken raw, either would fail the claim's
 * `jsonb` with a 500 before the route could answer its 400 naming the field.
 */
function asStored(value: unknown): string | undefined {
  if (typeof value !== "string" || value.includes("\u0000")) return undefined;
  return withoutLoneSurrogates(value);
}

const ERASE_PATH = /^\/v1\/memory\/recall\/datasets\/[^/]+\/?$/;

function decodedSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

function parsedBody(body: Uint8Array): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(new TextDecoder().decode(body));
    return value && typeof value === "object" ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** The datasets of a scope, as SQL over the project's threads and episodes. */
function scopeDatasetsSql(projectId: string, scope: AnswerScope) {
  const list = (values: string[]) => sql`SELECT jsonb_array_elements_text(${JSON.stringify(values)}::jsonb)`;
  return sql`ARRAY(SELECT DISTINCT d FROM (
      SELECT jsonb_array_elements_text(${JSON.stringify(scope.datasets)}::jsonb) AS d
      UNION ALL SELECT dataset FROM ${threads} WHERE project_id = ${projectId} AND id IN (${list(scope.threadIds)})
      UNION ALL SELECT dataset FROM ${episodes} WHERE project_id = ${projectId} AND id IN (${list(scope.episodeIds)})
    ) s)`;
}

export interface Claim {
  projectId: string;
  key: string;
  claimId: string;
}

export interface StoredResponse {
  status: number;
  body: string;
  contentType: string | null;
}

export type ClaimOutcome =
  /**
   * The key is this request's: run it, then store or release. `takenOver`: it had expired or its
   * holder died; `holderWrote`: that holder had written before it died (`claimWroteSql`).
   */
  | { kind: "claimed"; claim: Claim; takenOver: boolean; holderWrote: boolean }
  /** The same request already answered: send this again. */
  | { kind: "replay"; response: StoredResponse }
  /** The key was used for a different request. */
  | { kind: "mismatch" }
  /** The first request with this key is still running. */
  | { kind: "running" };

const ClaimRow = z.object({
  outcome: z.enum(["claimed", "taken-over", "replay", "mismatch", "running"]),
  response_status: dbInt.nullable(),
  response_body: z.string().nullable(),
  response_content_type: z.string().nullable(),
  holder_wrote: z.boolean().nullable().optional(),
});
export type ClaimRow = z.output<typeof ClaimRow>;

/**
 * One statement. `prior` is the key's row as the statement's snapshot sees it; `taken` takes over
 * a row that expired or whose running claim's lease ran out; `fresh` inserts the row when there was
 * none. A row inserted by a concurrent claim after the snapshot makes `fresh` insert nothing and
 * `prior` see nothing: that request is running (409), as is one that took over concurrently.
 *
 * The claim commits without waiting for the disk (`synchronous_commit` off for this statement's
 * transaction alone): the write-ahead log is sequential, so the request's own durable write and
 * the durable store of its answer flush it; a claim lost to a crash belonged to a request that
 * never answered. A repeat that does not claim writes nothing at all.
 */
export async function claimKey(
  deps: Pick<Deps, "db" | "clock" | "config">,
  input: { projectId: string; key: string; fingerprint: string; scope?: AnswerScope },
): Promise<ClaimOutcome> {
  const now = deps.clock.now();
  const lockedUntil = new Date(now.getTime() + CLAIM_LEASE_MS).toISOString();
  const expiresAt = new Date(now.getTime() + deps.config.idempotencyTtlMs).toISOString();
  const claimId = randomBytes(16).toString("hex");
  const at = { now: now.toISOString(), lockedUntil, expiresAt };
  const [row] = parsedRowsOf(ClaimRow, await deps.db.execute(claimSql({ ...input, claimId }, at)));
  return claimOutcome(row, { projectId: input.projectId, key: input.key, claimId });
}

/** What a claim statement's row means for the request. */
export function claimOutcome(row: ClaimRow | undefined, claim: Claim): ClaimOutcome {
  switch (row?.outcome) {
    case "claimed":
    case "taken-over":
      return {
        kind: "claimed",
        claim,
        takenOver: row.outcome === "taken-over",
        holderWrote: row.outcome === "taken-over" && row.holder_wrote === true,
      };
    case "replay":
      return {
        kind: "replay",
        response: {
          status: Number(row.response_status),
          body: row.response_body ?? "",
          contentType: row.response_content_type,
        },
      };
    case "mismatch":
      return { kind: "mismatch" };
    default:
      return { kind: "running" };
  }
}

function claimSql(
  input: { projectId: string; key: string; fingerprint: string; claimId: string; scope?: AnswerScope },
  times: { now: string; lockedUntil: string; expiresAt: string },
) {
  const { projectId, key, fingerprint, claimId } = input;
  const datasets = input.scope ? scopeDatasetsSql(projectId, input.scope) : sql`NULL::text[]`;
  const { now: at, lockedUntil, expiresAt } = times;
  /** The row is a running claim (no answer stored) of this same request. */
  const sameRunningRequest = (alias: string) => {
    const r = sql.raw(alias);
    return sql`(${r}.response_status IS NULL AND ${r}.fingerprint = ${fingerprint})`;
  };
  /**
   * The row is free to take: a stored answer expired, or a claim running under a lease that ran out
   * (its holder died). A claim still renewing its lease is never free, whatever its expiry: taken
   * over, its request would run twice and its answer be lost.
   */
  const free = (alias: string) => {
    const r = sql.raw(alias);
    return sql`(CASE WHEN ${r}.response_status IS NULL THEN ${r}.locked_until <= ${at}::timestamptz
      ELSE ${r}.expires_at <= ${at}::timestamptz END)`;
  };
  return sql`
      WITH prior AS (
        SELECT k.* FROM ${idempotencyKeys} k WHERE k.project_id = ${projectId} AND k.key = ${key}
      ),
      taken AS (
        UPDATE ${idempotencyKeys} k SET fingerprint = ${fingerprint}, claim_id = ${claimId},
          locked_until = ${lockedUntil}::timestamptz, response_status = NULL, response_body = NULL,
          response_content_type = NULL, datasets = ${datasets}, created_at = ${at}::timestamptz,
          -- Kept for the same request taking over a running claim: if it dies too before storing
          -- the holder's answer, the next one still knows the holder wrote.
          wrote_at = CASE WHEN ${sameRunningRequest("k")} THEN k.wrote_at END,
          expires_at = ${expiresAt}::timestamptz
        WHERE k.project_id = ${projectId} AND k.key = ${key} AND ${free("k")}
        RETURNING 1
      ),
      fresh AS (
        INSERT INTO ${idempotencyKeys} (project_id, key, fingerprint, claim_id, locked_until, datasets, created_at, expires_at)
        SELECT ${projectId}, ${key}, ${fingerprint}, ${claimId}, ${lockedUntil}::timestamptz, ${datasets},
          ${at}::timestamptz, ${expiresAt}::timestamptz
        WHERE NOT EXISTS (SELECT 1 FROM prior)
        ON CONFLICT DO NOTHING
        RETURNING 1
      )
      SELECT
        CASE
          WHEN EXISTS (SELECT 1 FROM fresh) THEN 'claimed'
          WHEN EXISTS (SELECT 1 FROM taken) THEN 'taken-over'
          WHEN p.key IS NULL OR ${free("p")} THEN 'running'
          WHEN p.fingerprint <> ${fingerprint} THEN 'mismatch'
          WHEN p.response_status IS NULL THEN 'running'
          ELSE 'replay'
        END AS outcome,
        p.response_status, p.response_body, p.response_content_type,
        -- A running claim of this same request whose holder died after writing (an expired
        -- answer is no such claim; another request under the key runs as it would have).
        (${sameRunningRequest("p")} AND p.wrote_at IS NOT NULL) AS holder_wrote,
        ${commitWithoutFlush} AS _sync
      FROM (SELECT 1) one LEFT JOIN prior p ON true`;
}

/**
 * The answer of a claimed request, stored for replay: one statement, committed durably (a stored
 * answer lost to a crash would let a later repeat run the write again). Applies only while the
 * claim is still this request's.
 */
export async function storeResponse(deps: Pick<Deps, "db">, claim: Claim, response: StoredResponse): Promise<void> {
  await deps.db.execute(sql`
    UPDATE ${idempotencyKeys} SET response_status = ${response.status}, response_body = ${response.body},
      response_content_type = ${response.contentType}, locked_until = NULL
    WHERE project_id = ${claim.projectId} AND key = ${claim.key} AND claim_id = ${claim.claimId}`);
}

/**
 * SQL recording that the claim's request wrote and must not run again (chat: its user message),
 * when `wrote` holds; for the statement that writes, so both commit together and cost no round
 * trip. A takeover after a crash then answers the failure instead of writing twice.
 */
export function claimWroteSql(claim: Claim, now: string, wrote: SQL): SQL {
  return sql`
    UPDATE ${idempotencyKeys} SET wrote_at = ${now}::timestamptz
    WHERE project_id = ${claim.projectId} AND key = ${claim.key} AND claim_id = ${claim.claimId} AND ${wrote}`;
}

/**
 * Frees the key (a 5xx, an exception, a streamed answer that ended): a retry runs anew. Without a
 * disk flush of its own: a release lost to a crash leaves a running claim, taken over once its
 * lease runs out.
 */
export async function releaseKey(deps: Pick<Deps, "db">, claim: Claim): Promise<void> {
  await deps.db.execute(sql`
    DELETE FROM ${idempotencyKeys}
    WHERE project_id = ${claim.projectId} AND key = ${claim.key} AND claim_id = ${claim.claimId}
      AND ${commitWithoutFlush}`);
}

/** Pushes a running claim's lease ahead; false when the claim is no longer this request's. */
export async function renewClaim(deps: Pick<Deps, "db" | "clock">, claim: Claim): Promise<boolean> {
  const until = new Date(deps.clock.now().getTime() + CLAIM_LEASE_MS).toISOString();
  const rows = rowsOf(
    await deps.db.execute(sql`
      UPDATE ${idempotencyKeys} SET locked_until = ${until}::timestamptz
      WHERE project_id = ${claim.projectId} AND key = ${claim.key} AND claim_id = ${claim.claimId}
        AND response_status IS NULL AND ${commitWithoutFlush}
      RETURNING key`),
  );
  return rows.length > 0;
}

/** One bounded DELETE of expired keys (oldest first); returns how many went. */
export async function deleteExpiredKeys(deps: Pick<Deps, "db" | "clock">, limit: number): Promise<number> {
  const now = deps.clock.now().toISOString();
  return countDeleted(
    deps.db,
    // MATERIALIZED, as claimJobs' (lib/jobs/store.ts): a rescanned locking subquery goes past its limit.
    sql`WITH expired AS MATERIALIZED (
        SELECT project_id, key FROM ${idempotencyKeys}
        -- Not a claim still running (its lease renewed): its request would lose its answer.
        WHERE expires_at <= ${now}::timestamptz
          AND (response_status IS NOT NULL OR locked_until IS NULL OR locked_until <= ${now}::timestamptz)
        ORDER BY expires_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
      )
      DELETE FROM ${idempotencyKeys} k WHERE (k.project_id, k.key) IN (SELECT project_id, key FROM expired)`,
  );
}

/**
 * Expired keys go in bounded DELETEs, one after another while each finds a full batch: up to
 * 100,000 a sweep (1,666 keyed writes a second on the edge, 833 on Node.js at the default
 * interval). Past that a backlog drains over the next sweeps (expired keys are inert).
 */
export const EXPIRED_KEY_BATCHES = { batch: 5000, batches: 20 };

/**
 * The sweep's step: expired keys deleted `batch` at a time until a batch finds fewer (the backlog
 * is gone) or `batches` ran. One batch a sweep kept up with at most 5,000 keyed writes a sweep (83
 * a second on the edge's minute, 42 on the Node.js host's 2 minutes): the typed clients key every
 * write by default, so a busier service's table grew without end.
 */
export function deleteExpiredKeyBacklog(
  deps: Pick<Deps, "db" | "clock">,
  limits: { batch: number; batches: number },
): Promise<number> {
  return drainInBatches((limit) => deleteExpiredKeys(deps, limit), limits);
}
