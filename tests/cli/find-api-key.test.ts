import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findApiKey } from "../../lib/api-keys";
import { rowsOf } from "../../lib/db/rows";
import { HttpError } from "../../lib/errors";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * The key `memory-admin keys revoke <key>` names. A start of a preview shorter than `mk_` and four
 * characters named every key: an empty shell variable revoked a project's only key.
 */
let svc: TestService;
beforeAll(async () => {
  svc = await createTestService();
});
afterAll(() => svc?.close());

const refusal = (ref: string) =>
  findApiKey(svc.deps, { ref }).then(
    () => null,
    (err: unknown) => (err instanceof HttpError ? { status: err.status, message: err.message } : err),
  );

describe("findApiKey", () => {
  it("names no key from less than a preview's first seven characters, even where one key would match", async () => {
    const { keyId } = await newTenant(svc, "only-key");
    const [row] = rowsOf<{ key_preview: string }>(
      await svc.deps.db.execute(sql`SELECT key_preview FROM api_keys WHERE id = ${keyId}`),
    );
    for (const ref of ["", "m", "mk", "mk_", row.key_preview.slice(0, 6)]) {
      expect(await refusal(ref)).toEqual({
        status: 400,
        message: `"${ref}" names no API key: give the key's id (key_...), the key, or at least the first 7 characters of its preview (mk_1a2b)`,
      });
    }
    expect((await findApiKey(svc.deps, { ref: row.key_preview.slice(0, 7) })).id).toBe(keyId);
    expect((await findApiKey(svc.deps, { ref: row.key_preview })).id).toBe(keyId);
  });

  it("asks for the id when several keys share the start given", async () => {
    const { projectId } = await newTenant(svc, "twins");
    await svc.deps.db.execute(sql`
      INSERT INTO api_keys (id, name, key_hash, key_preview, project_id)
      VALUES ('key_twin_a', 'a', 'hash-a', 'mk_abcd...0001', ${projectId}),
             ('key_twin_b', 'b', 'hash-b', 'mk_abcd...0002', ${projectId})`);
    const answer = await refusal("mk_abcd");
    expect(answer).toMatchObject({ status: 400 });
    expect((answer as { message: string }).message).toMatch(
      /^"mk_abcd" matches several API keys \(key_twin_\w mk_abcd\.\.\.000\d, key_twin_\w mk_abcd\.\.\.000\d\): give its id$/,
    );
    expect((await findApiKey(svc.deps, { ref: "mk_abcd...0002" })).id).toBe("key_twin_b");
  });
});
