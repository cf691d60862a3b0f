import { OpenAPIHono, type RouteConfig, type RouteHandler } from "@hono/zod-openapi";
import type { AppEnv } from "./env";
import { declareFailure } from "./failures";

/**
 * Every sub-app is made here so validation failures take one path: the hook throws the ZodError
 * and `onError` (functions/errors.ts) renders `{error: 'Validation error', issues}`.
 */
export function createRouter() {
  const router = new OpenAPIHono<AppEnv>({
    defaultHook: (result) => {
      if (!result.success) throw result.error;
    },
  });
  // Each route's declared 500 message is recorded for its handler, where onError finds it.
  const register = router.openapi;
  router.openapi = ((route, handler, hook) => {
    declareFailure(route, handler);
    return register(route, handler, hook);
  }) as typeof router.openapi;
  return router;
}

/** A route and its handler, for a group that registers its operations in an order of its own. */
export interface Operation {
  register(router: OpenAPIHono<AppEnv>): void;
}

export function operation<R extends RouteConfig>(route: R, handler: RouteHandler<R, AppEnv>): Operation {
  return {
    register(router) {
      router.openapi(route, handler);
    },
  };
}
