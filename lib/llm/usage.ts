import type { ProviderCall } from "./client";

// The provider-call event lives beside the client (not in lib/usage) so that the Llm methods'
// meter depends on nothing that depends on Deps. Metrics and traces hear of each call from the
// client itself (observed() in client.ts), reading the tokens from the same meter.

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
