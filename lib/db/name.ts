import type { Config } from "../config";

/** Where the service keeps its data, for messages: never the URL's password. */
export function databaseName(config: Pick<Config, "databaseUrl" | "pgliteDir">): string {
  if (!config.databaseUrl) return `the embedded database at ${config.pgliteDir}`;
  try {
    const url = new URL(config.databaseUrl);
    return `the database at DATABASE_URL (${url.host}${url.pathname})`;
  } catch {
    return "the database at DATABASE_URL";
  }
}
