import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { systemClock } from "../../lib/clock";
import { createPgDatabase } from "../../lib/db/pg";
import type { Database } from "../../lib/db/types";
import type { Deps } from "../../lib/deps";
import { newId } from "../../lib/ids";
import { silentLogger } from "../../lib/log";
import { eraseDataset } from "../../lib/recall/dataset";
import { useServerConnections } from "../helpers/server-connections";
import { testPgUrl } from "../helpers/test-database";

/**
 * A dataset's erase racing the writes that hold its rows, in concurrent transactions (a server:
 * PGlite has one connection). An extraction's fact batch locks its episode, a cut locks its thread
 * and inserts an episode. The erase waits for them; what they commit meanwhile must go with the
 * dataset. (Found over HTTP on PostgreSQL: 1 erase in 260 left an extraction's facts live, and an
 * erase racing an end left the episode the end had cut.)
 */
describe.runIf(testPgUrl())("erasing a dataset while it is written (PostgreSQL server)", () => {
  const { clients, run, someoneWaitsForLock, databaseUrl } = useServerConnections(2);
  let writer: pg.Client;
  let observer: pg.Client;
  let database: Database;

  beforeAll(() => {
    [writer, observer] = clients;
    database = createPgDatabase(databaseUrl());
  });
  afterAll(() => database?.close());

  const erase = (projectId: string) =>
    eraseDataset(
      {
        deps: { db: database.db, database, clock: systemClock, log: silentLogger, defer: () => {} } as unknown as Deps,
        projectId,
      },
      { dataset: "ds" },
    );

  /** A project with one thread of one message, and a completed episode of it. */
  async function dataset() {
    const projectId = `prj_${randomUUID().slice(0, 8)}`;
    const threadId = newId("thr");
    const episodeId = newId("epi");
    await run(observer, sql`INSERT INTO projects (id, name) VALUES (${projectId}, 'erase race')`);
    await run(
      observer,
      sql`INSERT INTO threads (id, project_id, dataset, last_seq, episode_seq) VALUES (${threadId}, ${projectId}, 'ds', 1, 1)`,
    );
    await run(
      observer,
      sql`INSERT INTO messages (id, project_id, thread_id, seq, role, content, created_at)
        VALUES (${newId("msg")}, ${projectId}, ${threadId}, 1, 'user', 'I live in Lisbon', now())`,
    );
    await run(
      observer,
      sql`INSERT INTO episodes (id, project_id, thread_id, dataset, status, semantic_status, from_seq, to_seq,
          message_count, started_at, ended_at)
        VALUES (${episodeId}, ${projectId}, ${threadId}, 'ds', 'completed', 'processing', 1, 1, 1, now(), now())`,
    );
    return { projectId, threadId, episodeId };
  }

  const left = async (projectId: string) =>
    (
      await run(
        observer,
        sql`SELECT (SELECT count(*) FROM facts WHERE project_id = ${projectId})::int AS facts,
          (SELECT count(*) FROM episodes WHERE project_id = ${projectId})::int AS episodes,
          (SELECT count(*) FROM threads WHERE project_id = ${projectId})::int AS threads`,
      )
    ).rows[0];

  it("erases the facts an extraction commits while the erase waits for its episode", async () => {
    const { projectId, episodeId } = await dataset();
    // The extraction's batch: its episode first (the claim check), then its facts.
    await writer.query("BEGIN");
    await run(writer, sql`UPDATE episodes SET semantic_status = 'completed' WHERE id = ${episodeId}`);
    await run(
      writer,
      sql`INSERT INTO facts (id, project_id, dataset, episode_id, subject, predicate, object, confidence, source_quote, valid_at)
        VALUES (${newId("fct")}, ${projectId}, 'ds', ${episodeId}, 'user', 'lives_in', 'Lisbon', 0.9, 'I live in Lisbon', now())`,
    );
    const erasing = erase(projectId);
    await someoneWaitsForLock();
    await writer.query("COMMIT");
    const erased = await erasing;
    expect(erased.deleted).toEqual({ threads: 1, episodes: 1, facts: 1, entities: 0 });
    expect(await left(projectId)).toEqual({ facts: 0, episodes: 0, threads: 0 });
  });

  it("erases the episode a cut commits while the erase waits for its thread", async () => {
    const { projectId, threadId } = await dataset();
    await writer.query("BEGIN");
    await run(writer, sql`SELECT 1 FROM threads WHERE id = ${threadId} FOR UPDATE`);
    await run(
      writer,
      sql`INSERT INTO episodes (id, project_id, thread_id, dataset, status, from_seq, to_seq, message_count, started_at, ended_at)
        VALUES (${newId("epi")}, ${projectId}, ${threadId}, 'ds', 'pending', 1, 1, 1, now(), now())`,
    );
    const erasing = erase(projectId);
    await someoneWaitsForLock();
    await writer.query("COMMIT");
    expect((await erasing).deleted).toMatchObject({ threads: 1, episodes: 2 });
    expect(await left(projectId)).toEqual({ facts: 0, episodes: 0, threads: 0 });
  });
});
