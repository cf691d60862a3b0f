import { LRUCache } from "lru-cache";
import { type Clock, systemClock } from "./clock";

/** How long an API key the process saw accepted lets a read pay its provider call before the key's check. */
export const ACCEPTED_KEY_TTL_MS = 60_000;
/** Keys remembered at most (the least recently accepted go first): ~200 bytes each. */
export const ACCEPTED_KEYS_MAX = 10_000;

/**
 * API keys this process (on the edge, this isolate) saw accepted within the last
 * ACCEPTED_KEY_TTL_MS, by hash. A /v1 read whose key is among them does not
 * wait for the key's check before its provider call (recall's query embedding): the check rides
 * with the read's statement instead, over Neon in the same round trip, so an uncached recall is
 * one round trip instead of two. The check itself is never skipped: a revoked key still gets its
 * 401 on the very request after its revocation, and is forgotten then; what a revocation can cost
 * is the embedding calls of that key's requests in flight at that moment, each recorded in the
 * key's project's ledger. A key this process has not seen accepted (an unknown one included) is
 * checked before the provider is paid for anything.
 */
export interface AcceptedKeys {
  acceptedLately(keyHash: string): boolean;
  accepted(keyHash: string): void;
  refused(keyHash: string): void;
}

export function acceptedKeys(
  clock: Clock = systemClock,
  { ttlMs = ACCEPTED_KEY_TTL_MS, max = ACCEPTED_KEYS_MAX } = {},
): AcceptedKeys {
  // ttlResolution 0: the clock is read on every lookup (not cached for a millisecond by a timer).
  const keys = new LRUCache<string, true>({
    max,
    ttl: ttlMs,
    ttlResolution: 0,
    perf: { now: () => clock.now().getTime() },
  });
  return {
    acceptedLately: (keyHash) => keys.get(keyHash) === true,
    accepted: (keyHash) => {
      keys.set(keyHash, true);
    },
    refused: (keyHash) => {
      keys.delete(keyHash);
    },
  };
}
