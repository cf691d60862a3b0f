export {
  type AddMessageInput,
  type BatchMessage,
  type ChatInput,
  type ChatStream,
  type CreateThreadInput,
  type CrossThreadMessage,
  createMemoryClient,
  type ListEpisodesQuery,
  type ListFactsQuery,
  type ListMessagesQuery,
  type MemoryClient,
  type MemoryClientOptions,
  type QueryParams,
  type RecallInput,
  type RecallResult,
  type RequestBody,
  type ResponseBody,
  type UpdateThreadInput,
  type UsageQuery,
  type WaitForEpisodeOptions,
} from "./client.js";
export {
  type ErrorBody,
  MemoryApiError,
  MemoryEpisodeFailedError,
  MemoryError,
  MemoryNetworkError,
  MemoryTimeoutError,
  MemoryValidationError,
  MemoryWaitTimeoutError,
  type ValidationIssue,
} from "./errors.js";
export { backoffMs, isRetryable, parseRetryAfter, type RetryPolicy } from "./retry.js";
export type { components, paths } from "./schema.js";
export type { ChatEvent } from "./sse.js";
export type { CallOptions, RetryEvent } from "./transport.js";

import type { components } from "./schema.js";

type Schemas = components["schemas"];
export type Thread = Schemas["Thread"];
export type Message = Schemas["Message"];
export type Episode = Schemas["Episode"];
export type Fact = Schemas["Fact"];
export type Entity = Schemas["Entity"];
export type ChatReply = Schemas["ChatReply"];
export type DatasetExport = Schemas["DatasetExport"];
export type UsageReport = Schemas["UsageReport"];
