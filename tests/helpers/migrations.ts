import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MIGRATIONS_FOLDER } from "../../lib/db/migrate";

/**
 * A copy of the migrations folder as it was before migration `tag` (its journal and SQL files up
 * to the one before), in a new temporary directory, for a database made as an older release made
 * it. The caller removes the directory.
 */
export function migrationsBefore(tag: string): string {
  const dir = mkdtempSync(join(tmpdir(), "memsvc-migrations-"));
  mkdirSync(join(dir, "meta"));
  const journal = JSON.parse(readFileSync(join(MIGRATIONS_FOLDER, "meta", "_journal.json"), "utf8")) as {
    entries: { tag: string }[];
  };
  const upTo = journal.entries.findIndex((e) => e.tag === tag);
  if (upTo < 1) throw new Error(`no migration ${tag} after the first in the journal`);
  journal.entries = journal.entries.slice(0, upTo);
  writeFileSync(join(dir, "meta", "_journal.json"), JSON.stringify(journal));
  for (const file of readdirSync(MIGRATIONS_FOLDER).filter((f) => f.endsWith(".sql"))) {
    if (journal.entries.some((e) => `${e.tag}.sql` === file))
      copyFileSync(join(MIGRATIONS_FOLDER, file), join(dir, file));
  }
  return dir;
}
