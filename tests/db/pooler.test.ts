import { sql } from "drizzle-orm";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { createNodeService } from "../../functions/node";
import { parseConfig } from "../../lib/config";
import { createPgDatabase } from "../../lib/db/pg";
import { rowsOf } from "../../lib/db/rows";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { testLogger } from "../helpers/log";
import { newTenant } from "../helpers/service";
import { dropServerDatabase, newServerDatabase, serverDatabaseUrl, testPgUrl } from "../helpers/test-database";

/**
 * The service through PgBouncer in transaction mode, the mode managed poolers run (Neon's pooled
 * endpoint is PgBouncer in transaction mode). A pooler refuses a startup packet whose
 * `options` name a setting it does not track, so the node-postgres pool sends none and the settings
 * every session needs are the database's own (migrations 0003 and 0021); a transaction-mode pooler
 * hands each transaction whichever server session is free, so they must hold on all of them.
 * `npm run test:pg` starts the pooler in front of its server (scripts/pg-cluster.sh,
 * TEST_PGBOUNCER_URL); without it the file is skipped.
 */
const pooler = process.env.TEST_PGBOUNCER_URL;
const dropped: string[] = [];
afterAll(async () => {
  for (const name of dropped) await dropServerDatabase(name);
});

const setting = async (db: { execute: (q: ReturnType<typeof sql>) => Promise<unknown> }, name: string) =>
  rowsOf<Record<string, string>>(await db.execute(sql.raw(`SHOW ${name}`)))[0]?.[name];

describe.skipIf(!pooler || !testPgUrl())("through PgBouncer in transaction mode", () => {
  it("refuses a startup packet that sets JIT in its options (why the pool sends none)", async () => {
    const { name } = await newServerDatabase();
    dropped.push(name);
    const client = new pg.Client({ connectionString: serverDatabaseUrl(name, pooler), options: "-c jit=off" });
    await expect(client.connect()).rejects.toThrow(/unsupported startup parameter/);
    await client.end().catch(() => {});
  });

  it("migrates an empty database through it, serves writes and recall, and every session has JIT off", async () => {
    const { name } = await newServerDatabase({ empty: true });
    dropped.push(name);
    const url = serverDatabaseUrl(name, pooler);
    const database = createPgDatabase(url);
    const service = await createNodeService({
      config: parseConfig({
        DATABASE_URL: url,
        ADMIN_PASSWORD: "admin-password-for-tests",
        EMBEDDING_DIMENSIONS: String(TEST_EMBEDDING_DIMENSIONS),
        OPENAI_API_KEY: "",
        OPENAI_BASE_URL: "",
      }),
      database,
      log: testLogger(),
      sweepIntervalMs: false,
    });
    try {
      const { key } = await newTenant(service, "pooled");
      const call = async (path: string, json: unknown) => {
        const res = await service.app.request(path, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify(json),
        });
        return { status: res.status, body: (await res.json()) as Record<string, unknown> };
      };
      const thread = await call("/v1/threads", { dataset: "pooled" });
      expect(thread.status).toBe(201);
      const added = await call(`/v1/memory/working/threads/${thread.body.threadId}/messages`, {
        role: "user",
        content: "I keep my kayak at the marina in Setúbal.",
      });
      expect(added.status).toBe(201);
      const recalled = await call("/v1/memory/recall", { dataset: "pooled", query: "kayak", include: ["messages"] });
      expect(recalled.status).toBe(200);
      expect((recalled.body.messages as { content: string }[]).map((m) => m.content)).toEqual([
        "I keep my kayak at the marina in Setúbal.",
      ]);

      // Many sessions at once, so the pooler hands out several server sessions: each has the
      // database's settings, none from a startup packet.
      const seen = await Promise.all(
        Array.from({ length: 12 }, () =>
          database.db.transaction(async (tx) => ({
            jit: await setting(tx, "jit"),
            scan: await setting(tx, "hnsw.iterative_scan"),
            pid: rowsOf<{ pid: number }>(await tx.execute(sql`SELECT pg_backend_pid() AS pid, pg_sleep(0.05)`))[0]?.pid,
          })),
        ),
      );
      expect(new Set(seen.map((s) => s.pid)).size).toBeGreaterThan(1);
      expect(new Set(seen.map((s) => `${s.jit} ${s.scan}`))).toEqual(new Set(["off relaxed_order"]));
    } finally {
      await service.close();
    }
  });
});

describe.skipIf(!testPgUrl())("a new session on the server", () => {
  it("has JIT off by the database's setting; a URL's own options still decide", async () => {
    const { name, url } = await newServerDatabase();
    dropped.push(name);
    const plain = createPgDatabase(url);
    const chosen = createPgDatabase(`${url}${url.includes("?") ? "&" : "?"}options=${encodeURIComponent("-c jit=on")}`);
    try {
      expect(await setting(plain.db, "jit")).toBe("off");
      expect(await setting(chosen.db, "jit")).toBe("on");
    } finally {
      await plain.close();
      await chosen.close();
    }
  });
});
