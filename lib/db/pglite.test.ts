import { describe, expect, it } from "vitest";
import { createPgliteDatabase, PGLITE_SHARED_BUFFERS, pgliteClientOf } from "./pglite";

const wasmBytes = (client: ReturnType<typeof pgliteClientOf>) =>
  (client as unknown as { mod: { HEAPU8: Uint8Array } }).mod.HEAPU8.byteLength;

describe("embedded database memory", () => {
  it("starts Postgres with the small shared buffer pool, so the WASM memory stays at its initial 128 MiB", async () => {
    const database = await createPgliteDatabase();
    try {
      const client = pgliteClientOf(database);
      const { rows } = await client.query<{ shared_buffers: string }>("SHOW shared_buffers");
      expect(rows[0].shared_buffers).toBe(PGLITE_SHARED_BUFFERS);
      expect(wasmBytes(client)).toBeLessThanOrEqual(128 * 2 ** 20);
    } finally {
      await database.close();
    }
  });

  it("takes another size; PGlite's own 128MB grows the WASM memory past it", async () => {
    const database = await createPgliteDatabase({ sharedBuffers: "128MB" });
    try {
      const client = pgliteClientOf(database);
      const { rows } = await client.query<{ shared_buffers: string }>("SHOW shared_buffers");
      expect(rows[0].shared_buffers).toBe("128MB");
      expect(wasmBytes(client)).toBeGreaterThan(128 * 2 ** 20);
    } finally {
      await database.close();
    }
  });
});
