import { randomUUID } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import { beforeAll, beforeEach, expect } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { users } from "../../lib/db/schema";
import { newId } from "../../lib/ids";
import { createLlm } from "../../lib/llm/client";
import type { Issue } from "./api-types";
import { TEST_EMBEDDING_DIMENSIONS } from "./constants";
import { insertSession } from "./db-state";
import { useEpisodicService } from "./episodic-fixtures";
import { fakeEmbedding } from "./fake-openai";
import { ADMIN, type TestService } from "./service";

/**
 * Shared set-up for the dashboard route tests: the episodic service (real job path, manual clock,
 * fake provider) with every SQL statement recorded, an admin session, and rows written straight
 * into the memory tables where a test needs exact timestamps, statuses or embeddings.
 */
export const DIMS = TEST_EMBEDDING_DIMENSIONS;

export type { Issue };

type RequestOptions = NonNullable<Parameters<TestService["request"]>[1]>;

export function useDashboardService() {
  const statements: string[] = [];
  let recording = false;
  const episodic = useEpisodicService({
    onQuery: (statement) => {
      if (recording) statements.push(statement);
    },
  });
  const { h } = episodic;
  // The test client makes no retries; a keep-alive socket the fake server has just closed then
  // fails a valid model call with ECONNRESET now and then. Retry as the production client does
  // (tests that want a failure make the fake answer 400, which is never retried).
  beforeAll(() => {
    h.svc.deps.llm = createLlm(h.svc.deps.config, { maxRetries: 2, timeoutMs: 10_000 });
  });
  let session = "";
  /** A new admin session at the clock's now (tests that move the clock far call it again). */
  async function newSession() {
    const [admin] = await h.svc.deps.db.select().from(users).where(eq(users.username, ADMIN.username));
    session = await insertSession(h.svc.deps.db, admin.id, h.svc.deps.clock.now());
    return session;
  }
  beforeEach(newSession);

  /** A dashboard request with the admin session (or `token: null` for none). */
  function call(path: string, init: Omit<RequestOptions, "token"> & { token?: string | null } = {}) {
    const { token, ...rest } = init;
    return h.svc.request(path, { ...rest, ...(token === null ? {} : { token: token ?? session }) });
  }

  async function json<T>(res: Response, status: number): Promise<T> {
    const text = await res.text();
    expect(res.status, text).toBe(status);
    return JSON.parse(text) as T;
  }

  /** The body of a 200 (or `status`) answer to a dashboard GET. */
  const get = async <T>(path: string, status = 200) => json<T>(await call(path), status);

  /** Serves one request and returns it with the SQL statements sent while serving it. */
  async function measured(path: string, init: Parameters<typeof call>[1] = {}) {
    statements.length = 0;
    recording = true;
    try {
      const res = await call(path, init);
      const text = await res.text();
      return { status: res.status, text, statements: [...statements] };
    } finally {
      recording = false;
    }
  }

  async function expectError(res: Response, status: number, error: string) {
    const text = await res.text();
    expect({ status: res.status, body: text }).toEqual({ status, body: JSON.stringify({ error }) });
  }

  async function expectValidation(res: Response, path: (string | number)[]) {
    const body = await json<{ error: string; issues: Issue[] }>(res, 400);
    expect(body.error).toBe("Validation error");
    expect(body.issues.map((i) => i.path)).toContainEqual(path);
  }

  const db = () => h.svc.deps.db;

  const rows = {
    async entity(projectId: string, dataset: string, name: string, type = "ORG") {
      const id = newId("ent");
      await db().execute(sql`
        INSERT INTO entities (id, project_id, dataset, name, type, embedding, created_at)
        VALUES (${id}, ${projectId}, ${dataset}, ${name}, ${type}, ${`[${fakeEmbedding(name, DIMS)}]`}::vector,
                ${h.svc.deps.clock.now().toISOString()}::timestamptz)`);
      return id;
    },
    async fact(
      projectId: string,
      dataset: string,
      f: {
        predicate: string;
        object: string;
        validAt?: string;
        invalidAt?: string | null;
        createdAt?: string;
        confidence?: number;
        /** The fact's embedding: a vector, the embedding of a text, or none (outside vector search). */
        embedding?: number[] | string | null;
        entities?: string[];
        episodeId?: string | null;
      },
    ) {
      const id = `fct_${randomUUID().replaceAll("-", "").slice(0, 20)}`;
      const embedding =
        f.embedding === null
          ? null
          : Array.isArray(f.embedding)
            ? f.embedding
            : fakeEmbedding(f.embedding ?? `user ${f.predicate} ${f.object}`, DIMS);
      const now = h.svc.deps.clock.now().toISOString();
      await db().execute(sql`
        INSERT INTO facts (id, project_id, dataset, episode_id, subject, predicate, object, confidence, source_quote,
                           valid_at, invalid_at, embedding, created_at)
        VALUES (${id}, ${projectId}, ${dataset}, ${f.episodeId ?? null}, 'user', ${f.predicate}, ${f.object},
                ${f.confidence ?? 0.9}, ${`I said ${f.object}`}, ${f.validAt ?? now}::timestamptz,
                ${f.invalidAt ?? null}::timestamptz, ${embedding ? `[${embedding}]` : null}::vector,
                ${f.createdAt ?? now}::timestamptz)`);
      for (const entityId of f.entities ?? []) {
        await db().execute(sql`INSERT INTO fact_entities (fact_id, entity_id) VALUES (${id}, ${entityId})`);
      }
      return id;
    },
    async episode(
      projectId: string,
      dataset: string,
      e: {
        status?: string;
        semanticStatus?: string;
        semanticError?: string | null;
        semanticRetryCount?: number;
        createdAt?: string;
        updatedAt?: string;
        summarised?: boolean;
        threadId?: string;
      } = {},
    ) {
      const id = newId("epi");
      const at = e.createdAt ?? h.svc.deps.clock.now().toISOString();
      const summarised = e.summarised ?? (e.status ?? "completed") === "completed";
      await db().execute(sql`
        INSERT INTO episodes (id, project_id, thread_id, dataset, status, semantic_status, semantic_error,
                              semantic_retry_count, summary, key_learnings, message_count, from_seq, to_seq,
                              started_at, ended_at, embedding, created_at, updated_at)
        VALUES (${id}, ${projectId}, ${e.threadId ?? "thr_x"}, ${dataset}, ${e.status ?? "completed"},
                ${e.semanticStatus ?? "pending"}, ${e.semanticError ?? null}, ${e.semanticRetryCount ?? 0},
                ${summarised ? `summary of ${id}` : ""}, '[]'::jsonb, 2, 1, 2, ${at}::timestamptz, ${at}::timestamptz,
                ${summarised ? `[${fakeEmbedding(id, DIMS)}]` : null}::vector, ${at}::timestamptz,
                ${e.updatedAt ?? at}::timestamptz)`);
      return id;
    },
    /** Rows of a raw query. */
    async query<T>(statement: ReturnType<typeof sql>) {
      return rowsOf<T>(await db().execute(statement));
    },
  };

  return { ...episodic, call, json, get, measured, expectError, expectValidation, rows, newSession };
}
