import { sql } from "drizzle-orm";
import type { Deps } from "./deps";

/** Only the database is checked (the spec: not the provider, migrations or jobs). */
export async function checkHealth(deps: Deps, timeoutMs = 3000) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("database health check timed out")), timeoutMs);
  });
  try {
    await Promise.race([deps.db.execute(sql`SELECT 1`), timeout]);
    return { ok: true, body: { status: "ok", services: { postgres: "ok" } } } as const;
  } catch (err) {
    deps.log.warn("health check failed", { error: (err as Error).message });
    return { ok: false, body: { status: "degraded", services: { postgres: "error" } } } as const;
  } finally {
    clearTimeout(timer);
  }
}
