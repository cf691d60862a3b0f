import type { ProviderCall } from "./client";

// The provider-call event and its listener live beside the client (not in lib/usage) so that
// Deps, which carries the listener, depends on nothing that depends on Deps.

/** What a provider call was for: the ledger's `operation`. */
export const USAGE_OPERATIONS = [
  "episode_summary",
  "episode_embedding",
  "fact_extraction",
  "extraction_embedding",
  "contradiction_judge",
  "message_embedding",
  "recall_embedding",
  "recall_rerank",
  "recall_synthesis",
  "episode_search_embedding",
  "chat",
  "compaction",
] as const;
export type UsageOperation = (typeof USAGE_OPERATIONS)[number];

/** One provider call, as the ledger records it (and a metrics listener hears of it). */
export interface UsageEvent extends ProviderCall {
  operation: UsageOperation;
}

/**
 * Hears of every provider call as it ends, before it is written (`Deps.onUsage`): the hook for
 * metrics (tokens by kind, model and operation). Never throws into the call: errors are ignored.
 */
export type UsageListener = (event: UsageEvent) => void;
