/**
 * A backlog deleted in bounded statements: `deleteBatch(batch)` runs again while it finds a full
 * batch (more may be left), at most `batches` times. Returns how many rows went. What is left past
 * the cap waits for the next sweep: the rows a sweep deletes are inert.
 */
export async function drainInBatches(
  deleteBatch: (limit: number) => Promise<number>,
  { batch, batches }: { batch: number; batches: number },
): Promise<number> {
  let deleted = 0;
  for (let i = 0; i < batches; i++) {
    const n = await deleteBatch(batch);
    deleted += n;
    if (n < batch) break;
  }
  return deleted;
}
