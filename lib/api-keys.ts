import { and, desc, eq, isNull, or, sql } from "drizzle-orm";
import { FULL_KEY, hashToken, keyPreview, keyRefProblem, newApiKey } from "./crypto";
import { pageWithTotal } from "./db/paging";
import { toIso } from "./db/rows";
import { apiKeys, projects } from "./db/schema";
import type { DbDeps } from "./deps";
import { badRequest, notFound } from "./errors";
import { newId } from "./ids";
import { projectCount, requireProject } from "./projects";

type ApiKeyRow = typeof apiKeys.$inferSelect;

/** A project's verbs over keys need only the database and the clock (a ProjectContext is one). */
interface KeyContext {
  deps: DbDeps;
  projectId: string;
}

export function apiKeyRecord(k: ApiKeyRow) {
  return {
    id: k.id,
    name: k.name,
    keyPreview: k.keyPreview,
    projectId: k.projectId,
    createdAt: new Date(k.createdAt).toISOString(),
    lastUsedAt: toIso(k.lastUsedAt),
    revokedAt: toIso(k.revokedAt),
  };
}

/** The plaintext key is returned here and never again; only its hash is stored. */
export async function createApiKey({ deps, projectId }: KeyContext, input: { name: string }) {
  const [project] = await deps.db.select({ id: projects.id }).from(projects).where(eq(projects.id, projectId));
  if (!project) throw notFound("Project not found");
  const key = newApiKey();
  const [row] = await deps.db
    .insert(apiKeys)
    .values({
      id: newId("key"),
      name: input.name,
      keyHash: hashToken(key),
      keyPreview: keyPreview(key),
      projectId,
      createdAt: deps.clock.now(),
    })
    .returning();
  return { key, apiKey: apiKeyRecord(row) };
}

export async function listApiKeys({ deps, projectId }: KeyContext, page: { limit: number; offset: number }) {
  const listed = await pageWithTotal(
    deps.db,
    apiKeys,
    eq(apiKeys.projectId, projectId),
    [desc(apiKeys.createdAt), desc(apiKeys.id)],
    page,
    projectCount(projectId),
  );
  requireProject(listed);
  return { apiKeys: listed.rows.map(apiKeyRecord), total: listed.total };
}

/** Revocation is permanent and idempotent: revoking twice keeps the first revokedAt. */
export async function revokeApiKey(deps: DbDeps, { apiKeyId: id }: { apiKeyId: string }) {
  const [revoked] = await deps.db
    .update(apiKeys)
    .set({ revokedAt: deps.clock.now() })
    .where(and(eq(apiKeys.id, id), isNull(apiKeys.revokedAt)))
    .returning();
  if (revoked) return { apiKey: apiKeyRecord(revoked) };
  const [existing] = await deps.db.select().from(apiKeys).where(eq(apiKeys.id, id));
  if (!existing) throw notFound("API key not found");
  return { apiKey: apiKeyRecord(existing) };
}

/**
 * The one key `ref` names, for the admin command line: its id, the key itself (found by its
 * hash), or its preview or the start of it (`mk_1a2b`). A preview's visible part is short, so
 * several keys may share one: then it names none and the error lists them.
 */
export async function findApiKey(deps: Pick<DbDeps, "db">, { ref }: { ref: string }) {
  const problem = keyRefProblem(ref);
  if (problem) throw badRequest(`"${ref}" names no API key: ${problem}`);
  const rows = await deps.db
    .select()
    .from(apiKeys)
    .where(
      FULL_KEY.test(ref)
        ? eq(apiKeys.keyHash, hashToken(ref))
        : or(eq(apiKeys.id, ref), sql`starts_with(${apiKeys.keyPreview}, ${ref})`),
    )
    .orderBy(desc(apiKeys.createdAt))
    .limit(6);
  const exact = rows.find((k) => k.id === ref);
  if (exact) return apiKeyRecord(exact);
  if (rows.length === 0) throw notFound(`API key "${ref}" not found (give its id, its preview or the key)`);
  if (rows.length > 1) {
    const shown = rows.slice(0, 5).map((k) => `${k.id} ${k.keyPreview}`);
    throw badRequest(
      `"${ref}" matches several API keys (${shown.join(", ")}${rows.length > 5 ? ", ..." : ""}): give its id`,
    );
  }
  return apiKeyRecord(rows[0]);
}
