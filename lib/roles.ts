import { z } from "zod";

/**
 * Who wrote a message: the one list of roles, for the `messages.role` column (lib/db/schema.ts),
 * the API's and the MCP tools' schemas and the rows read back.
 */
export const MESSAGE_ROLES = ["user", "assistant", "system", "tool"] as const;
export type MessageRole = (typeof MESSAGE_ROLES)[number];

/**
 * The roles as a zod enum (the routes add their description with `.openapi()`, the tools with
 * `.describe()`). A function, as lib/inputs.ts's are: a schema made before @hono/zod-openapi
 * extended zod has no `.openapi()`.
 */
export const messageRole = () => z.enum(MESSAGE_ROLES);

/** An object with one entry per role, in MESSAGE_ROLES order (a count per role, its schema). */
export function perRole<T>(value: (role: MessageRole) => T): Record<MessageRole, T> {
  return Object.fromEntries(MESSAGE_ROLES.map((role) => [role, value(role)])) as Record<MessageRole, T>;
}
