import { rmSync } from "node:fs";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { manualClock } from "../../lib/clock";
import { migrateDatabase } from "../../lib/db/migrate";
import { rowsOf } from "../../lib/db/rows";
import type { Database } from "../../lib/db/types";
import { HttpError } from "../../lib/errors";
import { createProject, findProject } from "../../lib/projects";
import { databaseBefore } from "../helpers/migrations";

/**
 * Migration 0036 (project names unique, compared trimmed and case-insensitively) on a database
 * made before it, where projects could share a name: it must not fail on them, nor rename or drop
 * any. The oldest of each name takes the key; a new project may not take any of those names.
 */
const DIMS = 64;
let database: Database;
let folder: string;

const project = (id: string, name: string, createdAt: string) =>
  database.db.execute(
    sql`INSERT INTO projects (id, name, created_at) VALUES (${id}, ${name}, ${createdAt}::timestamptz)`,
  );

beforeAll(async () => {
  ({ database, folder } = await databaseBefore("0036_project_name_unique", DIMS));
  // prj_old ('old') is there already.
  await project("prj_acme_2", "acme ", "2026-02-01T00:00:00Z");
  await project("prj_acme_1", "Acme", "2026-01-01T00:00:00Z");
  await project("prj_acme_3", " ACME", "2026-03-01T00:00:00Z");
  await project("prj_beta", "Beta", "2026-01-01T00:00:00Z");
  await project("prj_twin_b", "Twin", "2026-01-01T00:00:00Z");
  await project("prj_twin_a", "Twin", "2026-01-01T00:00:00Z");
  await migrateDatabase(database, DIMS);
}, 60_000);
afterAll(async () => {
  await database?.close();
  if (folder) rmSync(folder, { recursive: true, force: true });
});

const deps = () => ({ db: database.db, clock: manualClock(new Date("2026-06-01T00:00:00Z")) });

async function refused(name: string) {
  const err = await createProject(deps(), { name }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(HttpError);
  expect(err).toMatchObject({ status: 409, message: "Project name already taken" });
}

describe("migration 0036: project names unique", () => {
  it("keeps every project and its name; the oldest of each name takes the key, ties by id", async () => {
    const rows = rowsOf<{ id: string; name: string; name_key: string | null }>(
      await database.db.execute(sql`SELECT id, name, name_key FROM projects ORDER BY id`),
    );
    expect(rows).toEqual([
      { id: "prj_acme_1", name: "Acme", name_key: "acme" },
      { id: "prj_acme_2", name: "acme ", name_key: null },
      { id: "prj_acme_3", name: " ACME", name_key: null },
      { id: "prj_beta", name: "Beta", name_key: "beta" },
      { id: "prj_old", name: "old", name_key: "old" },
      { id: "prj_twin_a", name: "Twin", name_key: "twin" },
      { id: "prj_twin_b", name: "Twin", name_key: null },
    ]);
  });

  it("leaves the admin command line's lookup by name refusing a name two projects share", async () => {
    await expect(findProject(deps(), { ref: "Twin" })).rejects.toThrow(
      /^2 projects are named "Twin": name one by its id \(prj_twin_[ab], prj_twin_[ab]\)$/,
    );
    expect((await findProject(deps(), { ref: "Beta" })).id).toBe("prj_beta");
  });

  it("refuses a new project named as any of them, even once the keyed one is deleted", async () => {
    for (const name of ["ACME", "beta", "Old", "twin"]) await refused(name);
    await database.db.execute(sql`DELETE FROM projects WHERE id = 'prj_acme_1'`);
    await refused("acme");
    expect((await createProject(deps(), { name: "Gamma" })).name).toBe("Gamma");
    await refused(" gamma ");
  });
});
