-- An episode's vector stays in its row instead of going to TOAST, as migrations 0013 and 0025 did
-- for facts, entities and messages: at 1536 dimensions its half-precision vector is 3 KB, past
-- the default threshold (2032 bytes), and every episode the search ranks read it in chunks through
-- the TOAST table's index. An episode's row also holds its summary and key learnings, read only
-- for the episodes returned: with the vector's storage MAIN, those go out of line first and the
-- vector only if the row is still too large without them. Rows written from now on; rows written
-- before stay as they are until the table is rewritten (`VACUUM FULL episodes`: docs/operations.md).
ALTER TABLE "episodes" SET (toast_tuple_target = 4080);--> statement-breakpoint
ALTER TABLE "episodes" ALTER COLUMN "embedding" SET STORAGE MAIN;
