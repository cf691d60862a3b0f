import { and, desc, eq, isNull } from "drizzle-orm";
import type { ProjectContext } from "./context";
import { hashToken, keyPreview, newApiKey } from "./crypto";
import { pageWithTotal } from "./db/paging";
import { toIso } from "./db/rows";
import { apiKeys, projects } from "./db/schema";
import type { Deps } from "./deps";
import { notFound } from "./errors";
import { newId } from "./ids";

type ApiKeyRow = typeof apiKeys.$inferSelect;

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
export async function createApiKey({ deps, projectId }: ProjectContext, input: { name: string }) {
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

export async function listApiKeys({ deps, projectId }: ProjectContext, page: { limit: number; offset: number }) {
  const { rows, total } = await pageWithTotal(
    deps.db,
    apiKeys,
    eq(apiKeys.projectId, projectId),
    [desc(apiKeys.createdAt), desc(apiKeys.id)],
    page,
  );
  return { apiKeys: rows.map(apiKeyRecord), total };
}

/** Revocation is permanent and idempotent: revoking twice keeps the first revokedAt. */
export async function revokeApiKey(deps: Deps, { apiKeyId: id }: { apiKeyId: string }) {
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
