import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { createApiKey } from "../../lib/api-keys";
import { rowsOf } from "../../lib/db/rows";
import { createProject } from "../../lib/projects";
import { useEdgeWorker } from "../helpers/edge-worker";

/**
 * Idempotency keys on the edge host: the built Worker under workerd (Miniflare), the Neon driver
 * over SQL-over-HTTP to a local endpoint on a fresh copy of the migrated template. Every statement
 * is a round trip here, so they are counted.
 */

const edge = useEdgeWorker("idem");

async function call(path: string, init: { method?: string; token: string; key?: string; json?: unknown }) {
  const headers: Record<string, string> = { authorization: `Bearer ${init.token}` };
  if (init.key !== undefined) headers["idempotency-key"] = init.key;
  if (init.json !== undefined) headers["content-type"] = "application/json";
  const before = edge.sqlRequests.length;
  const res = await edge.mf.dispatchFetch(`http://localhost${path}`, {
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
    roundTrips: edge.sqlRequests.length - before,
  };
}

describe("Idempotency-Key on the Worker (Neon over HTTP)", () => {
  it("replays, refuses a different request, gives one write for concurrent duplicates, and counts round trips", async () => {
    const project = await createProject(edge.deps, { name: "edge-idem" });
    const { key: token } = await createApiKey({ deps: edge.deps, projectId: project.id }, { name: "edge-idem-key" });
    const threadCount = async () =>
      Number(
        rowsOf<{ n: number }>(
          await edge.database.db.execute(sql`SELECT count(*)::int AS n FROM threads WHERE project_id = ${project.id}`),
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
      await edge.database.db.execute(sql`SELECT count(*)::int AS n FROM messages WHERE thread_id = ${threadId}`),
    );
    expect(Number(n)).toBe(1);
  });
});
