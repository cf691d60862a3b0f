import { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "./env";

/**
 * Every sub-app is made here so validation failures take one path: the hook throws the ZodError
 * and `onError` (functions/errors.ts) renders `{error: 'Validation error', issues}`.
 */
export function createRouter() {
  return new OpenAPIHono<AppEnv>({
    defaultHook: (result) => {
      if (!result.success) throw result.error;
    },
  });
}
