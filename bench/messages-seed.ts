import { sql } from "drizzle-orm";
import { rowsOf } from "../lib/db/rows";
import type { Db } from "../lib/db/types";
import { type HnswBuild, vectorIndexName, vectorIndexSql } from "../lib/db/vector-indexes";
import { addTermsSql } from "../lib/evidence/terms";
import { benchEmbedding } from "./embedding";
import { ADJECTIVES, NOUNS } from "./fact-rows";
import { HNSW_BUILD_MEMORY } from "./seed";

/** Messages per seeded thread. */
const PER_THREAD = 100;
/** Messages per INSERT (the WASM heap holds one statement's rows), and vectors per INSERT. */
const CHUNK = 20_000;
const VECTOR_CHUNK = 2_000;

/** The text of seeded message `g`: a sentence of the facts' words with a word of its own. */
export function messageText(g: number): string {
  const adjective = ADJECTIVES[(g * 7) % ADJECTIVES.length];
  const noun = (k: number) => NOUNS[(g * k) % NOUNS.length];
  return `I think the ${adjective} ${noun(13)} of the ${noun(29)} club ${g % 200} matters to me, note w${g}`;
}

/**
 * Runs `load` (a bulk insert of messages) without the messages' keyword (GIN) and HNSW indexes,
 * then makes them again: a GIN index takes a bulk build far faster than row by row through its
 * small pending list, and an HNSW graph too. The keyword index is made again from its own
 * definition.
 */
export async function withMessageIndexesRebuilt(db: Db, dims: number, build: HnswBuild, load: () => Promise<void>) {
  await db.execute(sql.raw(`DROP INDEX IF EXISTS ${vectorIndexName("message_vectors", dims)}`));
  const [gin] = rowsOf<{ definition: string }>(
    await db.execute(sql`SELECT indexdef AS definition FROM pg_indexes WHERE indexname = 'message_search_search_idx'`),
  );
  await db.execute(sql`DROP INDEX IF EXISTS message_search_search_idx`);
  await load();
  // As the facts' builds do (./seed.ts): with PGlite's default 64MB the HNSW graph of 200,000
  // vectors outgrows maintenance_work_mem early and the rest goes into the on-disk index, many
  // times slower a row (a seed of 200,000 run so had not finished after 40 minutes).
  await db.execute(sql.raw(`SET maintenance_work_mem = '${HNSW_BUILD_MEMORY}'`));
  if (gin) await db.execute(sql.raw(gin.definition));
  await db.execute(sql.raw(vectorIndexSql("message_vectors", dims, build)));
  await db.execute(sql`RESET maintenance_work_mem`);
}

/**
 * `count` user messages in dataset "big" of `projectId`, 100 a thread, each indexed and embedded
 * as the service would leave them once their jobs ran (keyword row, counted into the statistics,
 * a vector): sentences of the facts' words with a word of their own, embedded by the bench
 * provider. The keyword and HNSW indexes are built after the rows. Answers the seconds it took
 * and bytes on disk per message.
 */
export async function seedMessages(
  db: Db,
  input: { projectId: string; count: number; dims: number; build: HnswBuild },
) {
  const { projectId, count, dims, build } = input;
  const started = performance.now();
  const threads = Math.ceil(count / PER_THREAD);
  await db.execute(sql`
    INSERT INTO threads (id, project_id, dataset, last_seq, live_count, last_message_at, created_at, updated_at)
    SELECT 'thr_bm_' || g, ${projectId}, 'big', ${PER_THREAD}, ${PER_THREAD}, now(), now(), now()
    FROM generate_series(1, ${threads}) g`);
  await withMessageIndexesRebuilt(db, dims, build, async () => {
    for (let from = 1; from <= count; from += CHUNK) {
      const rows = [];
      for (let g = from; g <= Math.min(count, from + CHUNK - 1); g++) {
        rows.push({ g, content: messageText(g) });
      }
      await db.execute(sql`
      WITH m AS (
        INSERT INTO messages (id, project_id, thread_id, seq, role, content, created_at)
        SELECT 'msg_bm_' || x.g, ${projectId}, 'thr_bm_' || ((x.g - 1) / ${PER_THREAD} + 1), (x.g - 1) % ${PER_THREAD} + 1,
          'user', x.content, now() - make_interval(secs => ${count} - x.g)
        FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS x(g int, content text)
        RETURNING id, thread_id, content, created_at),
      s AS (
        INSERT INTO message_search (message_id, project_id, thread_id, dataset, created_at, search, terms_counted)
        SELECT id, ${projectId}, thread_id, 'big', created_at, to_tsvector('english', content), true FROM m
        RETURNING project_id, dataset, search)
      ${addTermsSql(sql`s`)}`);
      // Each message's vector is the bench provider's embedding of its text (./embedding.ts), as the
      // facts' are: messages near a query in words are near it in meaning, as with a real model.
      for (let at = 0; at < rows.length; at += VECTOR_CHUNK) {
        const vectors = rows
          .slice(at, at + VECTOR_CHUNK)
          .map((r) => ({ id: `msg_bm_${r.g}`, v: `[${benchEmbedding(r.content, dims).join(",")}]` }));
        await db.execute(sql`
        INSERT INTO message_vectors (message_id, project_id, thread_id, dataset, created_at, embedding)
        SELECT s.message_id, s.project_id, s.thread_id, s.dataset, s.created_at, x.v::halfvec
        FROM jsonb_to_recordset(${JSON.stringify(vectors)}::jsonb) AS x(id text, v text)
        JOIN message_search s ON s.message_id = x.id`);
      }
    }
  });
  const [size] = rowsOf<{ messages: string; search: string; terms: string; vectors: string; n: string }>(
    await db.execute(sql`SELECT pg_total_relation_size('messages') AS messages,
      pg_total_relation_size('message_search') AS search, pg_total_relation_size('message_terms') AS terms,
      pg_total_relation_size('message_vectors') AS vectors, (SELECT count(*) FROM messages) AS n`),
  );
  const per = (bytes: string) => Number(bytes) / Number(size.n);
  return {
    seconds: (performance.now() - started) / 1000,
    bytesPerMessage: {
      message: per(size.messages),
      search: per(size.search),
      terms: per(size.terms),
      vector: per(size.vectors),
    },
  };
}

/**
 * `count` completed episodes in dataset "big" of `projectId`, one a day back from now, each
 * summarising a conversation in the facts' words and embedded by the bench provider (as
 * ./seed.ts's 50 are), then ANALYZE (the embedded database's statistics job would). Answers the
 * seconds it took.
 */
export async function seedEpisodes(db: Db, input: { projectId: string; count: number; dims: number }) {
  const { projectId, count, dims } = input;
  const started = performance.now();
  for (let from = 0; from < count; from += VECTOR_CHUNK) {
    const rows = Array.from({ length: Math.min(VECTOR_CHUNK, count - from) }, (_, k) => {
      const g = from + k;
      const summary = `The user talked about the ${ADJECTIVES[(g * 7) % ADJECTIVES.length]} ${NOUNS[(g * 13) % NOUNS.length]} and the ${NOUNS[(g * 29) % NOUNS.length]} club ${g % 200}`;
      return { g, summary, v: `[${benchEmbedding(summary, dims).join(",")}]` };
    });
    await db.execute(sql`
      INSERT INTO episodes (id, project_id, thread_id, dataset, status, semantic_status, summary, message_count,
        from_seq, to_seq, started_at, ended_at, embedding)
      SELECT 'epi_bm_' || x.g, ${projectId}, 'thr_bm_epi', 'big', 'completed', 'completed', x.summary, 2, 1, 2,
        now() - make_interval(days => x.g + 1), now() - make_interval(days => x.g + 1), x.v::halfvec
      FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS x(g int, summary text, v text)`);
  }
  await db.execute(sql`ANALYZE episodes`);
  return { seconds: (performance.now() - started) / 1000 };
}
