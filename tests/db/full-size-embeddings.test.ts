import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { ensureVectorIndexes, vectorIndexName } from "../../lib/db/vector-indexes";
import { type Retrieval, recallSql, retrieve } from "../../lib/recall/retrieve";
import { fakeEmbedding } from "../helpers/fake-openai";
import { fact, useSemanticService } from "../helpers/semantic-fixtures";

/**
 * 1536-dimensional embeddings (text-embedding-3-small's default size, the service's default
 * EMBEDDING_DIMENSIONS) end to end on the real database: stored at half precision inside their
 * rows, searched through the binary (sign-bit) HNSW indexes with a cosine re-rank by extraction's
 * duplicate and contradiction searches and by recall, and exported.
 */
const DIMS = 1536;
const S = useSemanticService({ env: { EMBEDDING_DIMENSIONS: String(DIMS) } });
const { h, tenant, extract, facts, entities } = S;
const db = () => h.svc.deps.db;
const cosine = (a: number[], b: number[]) => a.reduce((sum, x, i) => sum + x * b[i], 0);
const similarity = (a: string, b: string) => cosine(fakeEmbedding(a, DIMS), fakeEmbedding(b, DIMS));

beforeAll(async () => {
  // The test template was migrated for the tests' 64 dimensions.
  await ensureVectorIndexes(db(), DIMS);
});

describe("1536-dimensional embeddings", () => {
  it("are written by extraction, found by its duplicate search, recalled through the binary index and exported", async () => {
    const t = await tenant();
    const said = ["I live in Lisbon and I play the cello.", "Noted.", "My sister Ana lives in Porto.", "Nice."];
    await extract(t, said, {
      facts: [
        fact("lives_in", "Lisbon", "I live in Lisbon", { objectIsEntity: true }),
        fact("plays", "cello", "I play the cello"),
        fact("has_sister", "Ana", "My sister Ana lives in Porto", { objectIsEntity: true }),
      ],
      entities: [
        { name: "Lisbon", type: "PLACE" },
        { name: "Ana", type: "PERSON" },
      ],
    });
    // The same fact again, in another episode: the write-time duplicate search finds it.
    const again = await extract(t, ["I live in Lisbon, as I said.", "Yes."], {
      facts: [fact("lives_in", "Lisbon", "I live in Lisbon, as I said", { objectIsEntity: true })],
      entities: [{ name: "Lisbon", type: "PLACE" }],
    });
    expect((await facts(t)).map((f) => `${f.predicate} ${f.object}`)).toEqual([
      "has_sister Ana",
      "lives_in Lisbon",
      "plays cello",
    ]);
    const [report] = rowsOf<{ report: { kept: number; dropped: { duplicate: number } } }>(
      await db().execute(sql`SELECT extraction_report AS report FROM episodes WHERE id = ${again.episodeId}`),
    );
    expect(report.report).toMatchObject({ kept: 0, dropped: { duplicate: 1 } });
    expect((await entities(t)).map((e) => [e.name, e.dims]).sort()).toEqual([
      ["Ana", DIMS],
      ["Lisbon", DIMS],
    ]);

    // Stored at half precision (2 bytes a dimension and an 8-byte header), inside the row.
    const [stored] = rowsOf<{ bytes: number; type: string; toasted: number }>(
      await db().execute(sql`
        SELECT max(pg_column_size(embedding)) AS bytes, pg_typeof(max(embedding::text)::halfvec)::text AS type,
          (SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE relname = 'facts') AS toasted
        FROM facts WHERE project_id = ${t.projectId}`),
    );
    expect(Number(stored.bytes)).toBe(2 * DIMS + 8);
    expect(Number(stored.toasted)).toBe(0);
    // The conversation's messages' vectors too (migration 0025): recall re-ranks 6 × its message
    // candidates by cosine over them, and a vector in TOAST is read in chunks through another index.
    const [messageVectors] = rowsOf<{ n: number; bytes: number; toasted: number }>(
      await db().execute(sql`
        SELECT count(*) AS n, max(pg_column_size(embedding)) AS bytes,
          (SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE relname = 'message_vectors') AS toasted
        FROM message_vectors WHERE project_id = ${t.projectId}`),
    );
    expect(Number(messageVectors.n)).toBeGreaterThan(0);
    expect(Number(messageVectors.bytes)).toBe(2 * DIMS + 8);
    expect(Number(messageVectors.toasted)).toBe(0);

    const res = await t.get("/v1/memory/recall", {
      method: "POST",
      json: { dataset: "ds", query: "where does the user live", include: ["raw"] },
    });
    const recalled = (await res.json()) as { facts: { object: string }[] };
    expect(res.status).toBe(200);
    expect(recalled.facts.map((f) => f.object)).toContain("Lisbon");

    // Every fact's cosine to the query, over the stored vectors.
    const retrieval: Retrieval = {
      projectId: t.projectId,
      dataset: "ds",
      mode: "hybrid",
      query: "where does the user live",
      vector: fakeEmbedding("where does the user live", DIMS),
      facts: true,
      episodes: false,
    };
    const retrieved = await retrieve(h.svc.deps, retrieval);
    for (const f of retrieved.facts ?? []) {
      const stored = await similarity(`user ${f.predicate} ${f.object}`, retrieval.query as string);
      expect(f.signals.vector, f.object).toBeCloseTo(stored, 2);
    }
    // (A handful of rows is cheaper to scan: the planner is kept off sequential scans to show that
    // the index matches the statement's search.)
    await db().execute(sql`SET enable_seqscan = off`);
    const plan = rowsOf<Record<string, string>>(await db().execute(sql`EXPLAIN ${recallSql(h.svc.deps, retrieval)}`))
      .map((r) => Object.values(r)[0])
      .join("\n");
    await db().execute(sql`RESET enable_seqscan`);
    // The statement's fact search is the binary index's (expression and predicate).
    expect(plan).toContain(`Index Scan using ${vectorIndexName("facts", DIMS)}`);
    expect(plan).toContain("Order By: ((binary_quantize(embedding))::bit(1536) <~>");

    // An episode's too (migration 0026), even when its summary and key learnings are long: they go
    // out of line first. Random text does not compress, so the row is ~2 KB of text over the vector's 3 KB.
    const text = (n: number) => Array.from({ length: n }, () => Math.random().toString(36).slice(2, 10)).join(" ");
    const vector = `[${fakeEmbedding("an episode about Lisbon", DIMS).join(",")}]`;
    await db().execute(sql`
      INSERT INTO episodes (id, project_id, thread_id, dataset, status, semantic_status, summary, key_learnings,
        message_count, from_seq, to_seq, started_at, ended_at, embedding)
      VALUES ('epi_long_1536', ${t.projectId}, 'thr_long_1536', 'ds', 'completed', 'completed', ${text(170)},
        ${JSON.stringify([text(30), text(30)])}::jsonb, 2, 1, 2, now(), now(), ${vector}::halfvec)`);
    const [episode] = rowsOf<{ vector: number; summary: number; learnings: number; toast: string }>(
      await db().execute(sql`
        SELECT pg_column_size(embedding) AS vector, octet_length(summary) AS summary,
          octet_length(key_learnings::text) AS learnings,
          (SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = 'episodes') AS toast
        FROM episodes WHERE id = 'epi_long_1536'`),
    );
    expect(Number(episode.vector)).toBe(2 * DIMS + 8);
    expect(Number(episode.summary) + Number(episode.learnings)).toBeGreaterThan(1500);
    // What is out of line is the text: the TOAST table holds fewer bytes than a vector.
    const [toasted] = rowsOf<{ bytes: number | null }>(
      await db().execute(sql.raw(`SELECT sum(octet_length(chunk_data)) AS bytes FROM ${episode.toast}`)),
    );
    expect(Number(toasted.bytes ?? 0)).toBeGreaterThan(0);
    expect(Number(toasted.bytes)).toBeLessThan(2 * DIMS);

    const exported = await t.get("/v1/memory/recall/datasets/ds/export");
    expect(exported.status).toBe(200);
    const dump = (await exported.json()) as { facts: { object: string }[]; entities: { name: string }[] };
    expect(dump.facts.map((f) => f.object).sort()).toEqual(["Ana", "Lisbon", "cello"]);
    expect(dump.entities.map((e) => e.name).sort()).toEqual(["Ana", "Lisbon"]);
  });
});
