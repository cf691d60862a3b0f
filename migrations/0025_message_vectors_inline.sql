-- A message's vector stays in its row (up to half a page, 4080 bytes) instead of going to TOAST,
-- as migration 0013 did for facts and entities: at 1536 dimensions the half-precision vector is
-- 3 KB, past the default threshold (2032 bytes), so each one went out of line in two chunks and
-- every distance recall computes over a message's vector (the binary index re-ranks
-- 6 × its candidates by cosine) first read those chunks through the TOAST table's index.
-- Rows written from now on stay whole; rows written before stay as they are (correct, only
-- slower to read) until the table is rewritten (`VACUUM FULL message_vectors`: docs/operations.md).
ALTER TABLE "message_vectors" SET (toast_tuple_target = 4080);
