import { rmSync } from "node:fs";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrateDatabase } from "../../lib/db/migrate";
import { rowsOf } from "../../lib/db/rows";
import type { Database } from "../../lib/db/types";
import { databaseBefore } from "../helpers/migrations";

/**
 * Migration 0024 on a database made before it: a fact extracted before facts linked every entity
 * they name gains the links extraction makes now (lib/semantic/candidates.ts, factLinks): the
 * entities of its episode's facts that its object or subject names as whole words.
 */
const DIMS = 64;
let database: Database;
let folder: string;

const episode = (id: string) => sql`
  INSERT INTO episodes (id, project_id, thread_id, dataset, status, from_seq, to_seq, started_at, ended_at)
  VALUES (${id}, 'prj_old', 'thr_a', 'ds', 'completed', 1, 2, now(), now())`;
const fact = (id: string, episodeId: string | null, predicate: string, object: string) => sql`
  INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at, episode_id)
  VALUES (${id}, 'prj_old', 'ds', 'user', ${predicate}, ${object}, 0.9, ${object}, now(), ${episodeId})`;
const entity = (id: string, name: string) => sql`
  INSERT INTO entities (id, project_id, dataset, name, type) VALUES (${id}, 'prj_old', 'ds', ${name}, 'OTHER')`;
const link = (factId: string, entityId: string) =>
  sql`INSERT INTO fact_entities (fact_id, entity_id) VALUES (${factId}, ${entityId})`;

beforeAll(async () => {
  ({ database, folder } = await databaseBefore("0024_backfill_fact_links", DIMS));
  const db = database.db;
  await db.execute(sql`INSERT INTO threads (id, project_id, dataset) VALUES ('thr_a', 'prj_old', 'ds')`);
  for (const id of ["epi_1", "epi_2"]) await db.execute(episode(id));
  for (const [id, name] of [
    ["ent_noor", "Noor"],
    ["ent_bosch", "Bosch"],
    ["ent_denver", "Denver"],
    ["ent_go", "Go"],
    ["ent_obrien", "O'Brien"],
  ]) {
    await db.execute(entity(id, name));
  }
  // Episode 1, as extraction linked it then: each entity to the fact naming it whole.
  await db.execute(fact("fct_sister", "epi_1", "has_sister", "Noor"));
  await db.execute(link("fct_sister", "ent_noor"));
  await db.execute(fact("fct_bosch", "epi_1", "works_at", "Bosch"));
  await db.execute(link("fct_bosch", "ent_bosch"));
  await db.execute(fact("fct_denver", "epi_1", "visited", "Denver"));
  await db.execute(link("fct_denver", "ent_denver"));
  await db.execute(fact("fct_go", "epi_1", "writes", "Go"));
  await db.execute(link("fct_go", "ent_go"));
  await db.execute(fact("fct_obrien", "epi_1", "knows", "O'Brien"));
  await db.execute(link("fct_obrien", "ent_obrien"));
  await db.execute(fact("fct_job", "epi_1", "knows_that", "Noor works at BOSCH, in Denver"));
  await db.execute(fact("fct_going", "epi_1", "likes", "going out with Sean O Brien"));
  // Another episode: Noor is not an entity of its extraction.
  await db.execute(fact("fct_other", "epi_2", "knows_that", "Noor visits often"));
  // No episode (written by hand): nothing to take its extraction's entities from.
  await db.execute(fact("fct_loose", null, "knows_that", "Bosch is big"));
  await migrateDatabase(database, DIMS);
});
afterAll(async () => {
  await database?.close();
  if (folder) rmSync(folder, { recursive: true, force: true });
});

describe("migration 0024: facts linked to every entity of their extraction they name", () => {
  it("links a fact to the entities of its episode named as whole words, keeps the old links, adds no others", async () => {
    const rows = rowsOf<{ fact_id: string; entity_id: string }>(
      await database.db.execute(sql`SELECT fact_id, entity_id FROM fact_entities ORDER BY fact_id, entity_id`),
    );
    expect(rows.map((r) => `${r.fact_id} ${r.entity_id}`)).toEqual([
      "fct_bosch ent_bosch",
      "fct_denver ent_denver",
      "fct_go ent_go",
      // "going" is not the word "go"; "O Brien" is O'Brien's match key.
      "fct_going ent_obrien",
      "fct_job ent_bosch",
      "fct_job ent_denver",
      "fct_job ent_noor",
      "fct_obrien ent_obrien",
      "fct_sister ent_noor",
    ]);
  });
});
