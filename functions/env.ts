import type { ApiKeyPrincipal, SessionPrincipal } from "../lib/auth";
import type { ProjectRef } from "../lib/db/types";
import type { Deps } from "../lib/deps";
import type { Claim } from "../lib/idempotency";

/** Hono context variables shared by every sub-app. */
export type AppEnv = {
  Variables: {
    deps: Deps;
    apiKey: ApiKeyPrincipal;
    /** A read's project, as SQL that checks its API key (functions/middleware.ts); else unset. */
    projectScope: ProjectRef;
    /** Whose ledger a read's provider calls go to, as SQL (`DeferredApiKey.ledgerProjectId`); else unset. */
    ledgerScope: ProjectRef;
    /** A read's tenant while its project is SQL (`DeferredApiKey.tenant`); else unset. */
    readTenant: string;
    session: SessionPrincipal;
    /** Set by onError when the request was refused before it ran (its input); see `refusedInput`. */
    inputRefused: boolean;
    /** Set when the request wrote before it failed (chat's user message): its 5xx is kept under an `Idempotency-Key`. */
    wroteBeforeFailing: boolean;
    /** The request's claim on its `Idempotency-Key`, while it runs (functions/idempotency.ts); else unset. */
    idempotencyClaim: Claim;
    /**
     * A streamed answer's events as its repeats under an `Idempotency-Key` get them, once the
     * stream has ended (chat: its start, its text as one delta, and how it ended).
     */
    streamReplay: Promise<string>;
  };
};
