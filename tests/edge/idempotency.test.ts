import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createApiKey } from "../../lib/api-keys";
import { systemClock } from "../../lib/clock";
import { createPgliteDatabase } from "../../lib/db/pglite";
import { rowsOf } from "../../lib/db/rows";
import type { Database } from "../../lib/db/types";
import type { Deps } from "../../lib/deps";
import { type NeonHttpEndpoint, startNeonHttpEndpoint } from "../../lib/dev/neon-http-endpoint";
import { createProject } from "../../lib/projects";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { buildWorkerBundle, workerConfig } from "../helpers/worker-bundle";

/**
 * Idempotency keys on the edge host: the built Worker under workerd (Miniflare), the Neon driver
 * over SQL-over-HTTP to a local endpoint on a fresh copy of the migrated template. Every statement
 * is a round trip here, so they are counted.
 */

let buildDir: string;
let database: Database;
let endpoint: NeonHttpEndpoint;
let mf: Miniflare;
/** What making a project and a key needs (the database and a clock). */
let deps: Deps;
const sqlRequests: string[][] = [];

beforeAll(async () => {
  buildDir = mkdtempSync(join(tmpdir(), "memsvc-idem-worker-"));
  const build = buildWorkerBundle(buildDir);
  database = await createPgliteDatabase({ loadDataDir: new Blob([readFileSync(inject("templatePath"))]) });
  deps = { db: database.db, database, clock: systemClock } as Deps;
  endpoint = await startNeonHttpEndpoint({ database, onRequest: (queries) => sqlRequests.push(queries) });
  const script = await build;
  const text = (value: string) => ({ type: "text" as const, value });
  mf = new Miniflare({
    workers: [
      {
        config: {
          ...workerConfig(script),
          env: {
            DATABASE_URL: text("postgres://user:pass@localhost/db"),
            NEON_FETCH_ENDPOINT: text(endpoint.fetchEndpoint),
            EMBEDDING_DIMENSIONS: text(String(TEST_EMBEDDING_DIMENSIONS)),
            LOG_LEVEL: text("error"),
          },
        },
      },
    ],
  });
  await mf.ready;
}, 120_000);

afterAll(async () => {
  await mf?.dispose();
  await endpoint?.close();
  await database?.close();
  if (buildDir) rmSync(buildDir, { recursive: true, force: true });
});

async function call(path: string, init: { method?: string; token: string; key?: string; json?: unknown }) {
  const headers: Record<string, string> = { authorization: `Bearer ${init.token}` };
  if (init.key !== undefined) headers["idempotency-key"] = init.key;
  if (init.json !== undefined) headers["content-type"] = "application/json";
  const before = sqlRequests.length;
  const res = await mf.dispatchFetch(`http://localhost${path}`, {
    method: init.method ?? "POST",
    headers,
    body: init.json === undefined ? undefined : JSON.stringify(init.json),
  });
  const text = await res.text();
  return {
    status: res.status,
    text,
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
    body: (text ? JSON.parse(text) : undefined) as any,
    replayed: res.headers.get("idempotent-replayed"),
    roundTrips: sqlRequests.length - before,
  };
}

describe("Idempotency-Key on the Worker (Neon over HTTP)", () => {
  it("replays, refuses a different request, gives one write for concurrent duplicates, and counts round trips", async () => {
    const project = await createProject(deps, "edge-idem");
    const { key: token } = await createApiKey(deps, { name: "edge-idem-key", projectId: project.id });
    const threadCount = async () =>
      Number(
        rowsOf<{ n: number }>(
          await database.db.execute(sql`SELECT count(*)::int AS n FROM threads WHERE project_id = ${project.id}`),
        )[0].n,
      );

    const first = await call("/v1/threads", { token, key: "edge-1", json: { dataset: "edge" } });
    expect(first.status).toBe(201);
    expect(first.replayed).toBeNull();
    expect(first.roundTrips).toBe(4); // authentication, claim, the insert, the stored answer

    const again = await call("/v1/threads", { token, key: "edge-1", json: { dataset: "edge" } });
    expect([again.status, again.replayed, again.text]).toEqual([201, "true", first.text]);
    expect(again.roundTrips).toBe(2); // authentication, claim
    expect(await threadCount()).toBe(1);

    const other = await call("/v1/threads", { token, key: "edge-1", json: { dataset: "elsewhere" } });
    expect(other.status).toBe(422);
    expect(other.body).toEqual({ error: expect.stringMatching(/different request/) });

    const bad = await call("/v1/threads", { token, key: "x".repeat(256), json: { dataset: "edge" } });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: "Validation error", issues: [{ path: ["Idempotency-Key"] }] });

    const threadId: string = first.body.threadId;
    const burst = await Promise.all(
      Array.from({ length: 8 }, () =>
        call(`/v1/memory/working/threads/${threadId}/messages`, {
          token,
          key: "edge-burst",
          json: { role: "user", content: "once" },
        }),
      ),
    );
    const ran = burst.filter((r) => r.status === 201 && r.replayed === null);
    expect(ran).toHaveLength(1);
    for (const r of burst) expect([409, 201]).toContain(r.status);
    const [{ n }] = rowsOf<{ n: number }>(
      await database.db.execute(sql`SELECT count(*)::int AS n FROM messages WHERE thread_id = ${threadId}`),
    );
    expect(Number(n)).toBe(1);
  });
});
