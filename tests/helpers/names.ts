import { randomUUID } from "node:crypto";

/**
 * `name` made unique with a short random suffix: project names are unique (lib/projects.ts,
 * createProject), and a test file makes many tenants of one name in its one database.
 */
export function uniqueProjectName(name: string): string {
  return `${name}-${randomUUID().slice(0, 8)}`;
}
