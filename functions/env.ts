import type { ApiKeyPrincipal, SessionPrincipal } from "../lib/auth";
import type { Deps } from "../lib/deps";

/** Hono context variables shared by every sub-app. */
export type AppEnv = {
  Variables: {
    deps: Deps;
    apiKey: ApiKeyPrincipal;
    session: SessionPrincipal;
  };
};
