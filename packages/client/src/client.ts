import createClient, { type Client } from "openapi-fetch";
import {
  MemoryApiError,
  MemoryEpisodeFailedError,
  MemoryError,
  MemoryNetworkError,
  MemoryTimeoutError,
  MemoryValidationError,
  MemoryWaitTimeoutError,
} from "./errors.js";
import { DEFAULT_RETRY, isRetryable, type RetryPolicy } from "./retry.js";
import type { components, paths } from "./schema.js";
import { type ChatEvent, readChatEvents } from "./sse.js";
import {
  type Attempt,
  type CallKind,
  type CallOptions,
  callKey,
  perform,
  type RetryEvent,
  sleep,
  type TransportConfig,
} from "./transport.js";

type Method = "get" | "post" | "patch" | "delete";
type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;
/** The JSON body of an operation, as the server's OpenAPI document describes it. */
export type RequestBody<P extends keyof paths, M extends Method> =
  Operation<P, M> extends {
    requestBody?: { content: { "application/json": infer B } };
  }
    ? B
    : never;
/** The query parameters of an operation. */
export type QueryParams<P extends keyof paths, M extends Method> =
  Operation<P, M> extends {
    parameters: { query?: infer Q };
  }
    ? NonNullable<Q>
    : never;
/** The success body of an operation. */
export type ResponseBody<P extends keyof paths, M extends Method> =
  Operation<P, M> extends {
    responses: infer R;
  }
    ? {
        [S in keyof R]: S extends 200 | 201
          ? R[S] extends { content: { "application/json": infer B } }
            ? B
            : never
          : never;
      }[keyof R]
    : never;

export type CreateThreadInput = RequestBody<"/v1/threads", "post">;
export type UpdateThreadInput = RequestBody<"/v1/threads/{id}", "patch">;
export type AddMessageInput = RequestBody<"/v1/memory/working/threads/{threadId}/messages", "post">;
export type BatchMessage = RequestBody<
  "/v1/memory/working/threads/{threadId}/messages:batch",
  "post"
>["messages"][number];
export type CrossThreadMessage = RequestBody<"/v1/memory/working/messages:batch", "post">["messages"][number];
export type ChatInput = RequestBody<"/v1/memory/working/threads/{threadId}/chat", "post">;
type ChatReply = components["schemas"]["ChatReply"];
type Episode = components["schemas"]["Episode"];
export type RecallInput = RequestBody<"/v1/memory/recall", "post">;
export type RecallResult = ResponseBody<"/v1/memory/recall", "post">;
export type ListMessagesQuery = QueryParams<"/v1/memory/working/threads/{threadId}/messages", "get">;
export type ListEpisodesQuery = QueryParams<"/v1/memory/episodic/datasets/{dataset}/episodes", "get">;
/** `GET /v1/usage`'s query: `start`, `end` (ISO datetime or YYYY-MM-DD), `groupBy`, `limit`. */
export type UsageQuery = QueryParams<"/v1/usage", "get">;
export type ListFactsQuery = QueryParams<"/v1/memory/semantic/datasets/{dataset}/facts", "get">;

/**
 * `threads.chatStream`'s events (iterate with `for await`), and the `Idempotency-Key` it is sent
 * with (undefined when sent without one), known before the first event: a stream that fails once
 * started (cut, stalled, ended before `done`) throws an error carrying the same key, and a repeat
 * under it gets the events the service kept instead of storing the turn again.
 */
export type ChatStream = AsyncGenerator<ChatEvent> & { readonly idempotencyKey: string | undefined };

/** How `episodes.waitFor` waits. */
export interface WaitForEpisodeOptions {
  /**
   * The whole wait, in ms (default 60 000), outages included; then it rejects with
   * `MemoryWaitTimeoutError`.
   */
  timeoutMs?: number;
  /** Between two reads of the episode, in ms (default 250). */
  intervalMs?: number;
  /** Cancels the wait; it rejects with the signal's reason. */
  signal?: AbortSignal;
  /**
   * Also wait for the episode's fact extraction (its `extractionReport`), so that facts and recall
   * hold what it learnt (default false: the summary is enough). With semantic memory disabled no
   * report ever comes: the wait times out.
   */
  facts?: boolean;
}

export interface MemoryClientOptions {
  /** Where the service is, e.g. `http://localhost:8787` (no `/v1`). */
  baseUrl: string;
  /** A project's API key (a server-side secret: never ship it to a browser). */
  apiKey: string;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
  /** How long one attempt may take, in ms (default 30 000; 0: no limit). */
  timeoutMs?: number;
  /** Attempts after the first for retryable failures (default 2). */
  retries?: number;
  /** Backoff: the first wait's ceiling and the longest wait, in ms (defaults 250 and 10 000). */
  backoff?: { baseDelayMs?: number; maxDelayMs?: number };
  /** Send an automatic Idempotency-Key on every write (default true), which makes retried writes safe. */
  idempotencyKeys?: boolean;
  /** Called before each retry. */
  onRetry?: (event: RetryEvent) => void;
  /** Headers sent on every call. */
  headers?: Record<string, string>;
}

/** What openapi-fetch reads of its Request (no middleware is used): the URL, the init, the method. */
class PlainRequest {
  readonly method: string;
  constructor(
    readonly url: string,
    readonly init: RequestInit,
  ) {
    this.method = (init.method ?? "GET").toUpperCase();
  }
}

/** A required string parameter: the service would answer 400 or 404 to an empty one. */
function required(field: string, value: unknown): string {
  if (typeof value !== "string" || value.length === 0) {
    throw new MemoryValidationError(field, "must be a non-empty string");
  }
  return value;
}

/**
 * A required string as one path segment. `.` and `..` are refused: no encoding keeps them one
 * segment (a URL parser folds `%2E` too), so the request would reach another route
 * (`entities.facts(dataset, "..")` would list every fact of the dataset).
 */
function segment(field: string, value: unknown): string {
  const text = required(field, value);
  if (text === "." || text === "..") {
    throw new MemoryValidationError(field, `must not be "${text}" (a URL path folds it into another route)`);
  }
  return text;
}

/** Characters as the service counts them: code points ("🙂" is one), not UTF-16 units. */
const characters = (text: string) => [...text].length;

function dataset(value: unknown): string {
  const name = required("dataset", value);
  if (characters(name) > 256) throw new MemoryValidationError("dataset", "must be at most 256 characters");
  return name;
}

function content(field: string, value: unknown): void {
  if (typeof value !== "string" || value.length === 0) {
    throw new MemoryValidationError(field, "must be non-empty text");
  }
}

/**
 * A typed client for the service's `/v1` API. Every method returns the service's JSON body, and
 * throws a `MemoryApiError` (status and the service's message), `MemoryNetworkError`,
 * `MemoryTimeoutError` or `MemoryValidationError` (refused before sending).
 *
 * Reads (GET, recall, prepare) are retried on 429, 5xx, network errors and timeouts; writes carry
 * an automatic `Idempotency-Key` and are retried on the same, since the service answers a repeat
 * from the first answer. A write sent without a key (`idempotencyKey: false`) is never retried.
 */
export function createMemoryClient(options: MemoryClientOptions) {
  required("baseUrl", options.baseUrl);
  required("apiKey", options.apiKey);
  const send = options.fetch ?? ((input: string, init?: RequestInit) => globalThis.fetch(input, init));
  const api = createClient<paths>({
    baseUrl: options.baseUrl,
    // openapi-fetch builds a Request and fetch builds its own from it: half the client's cost per
    // call (twice that with a signal). A plain holder of the URL and init makes it one.
    Request: PlainRequest as unknown as typeof Request,
    fetch: ((request: PlainRequest) => send(request.url, request.init)) as unknown as typeof fetch,
    headers: { ...options.headers, Authorization: `Bearer ${options.apiKey}` },
  });
  const retry: RetryPolicy = {
    retries: options.retries ?? DEFAULT_RETRY.retries,
    baseDelayMs: options.backoff?.baseDelayMs ?? DEFAULT_RETRY.baseDelayMs,
    maxDelayMs: options.backoff?.maxDelayMs ?? DEFAULT_RETRY.maxDelayMs,
  };
  const config: TransportConfig = {
    timeoutMs: options.timeoutMs ?? 30_000,
    retry,
    idempotencyKeys: options.idempotencyKeys ?? true,
    onRetry: options.onRetry,
  };
  const call: Call = (label, kind, o, attempt) => perform(config, label, kind, o, attempt);
  return {
    threads: { ...threadCalls(api, call), ...messageCalls(api, call), ...chatCalls(api, call, config) },
    ...memoryCalls(api, call),
    episodes: episodeCalls(api, call),
    ...semanticCalls(api, call),
  };
}

type Api = Client<paths>;
type Call = <D>(label: string, kind: CallKind, o: CallOptions | undefined, attempt: Attempt<D>) => Promise<D>;

/** Threads: create, read, tag, end. */
function threadCalls(api: Api, call: Call) {
  return {
    /** A new thread in `dataset` (a new one on every call). */
    create: async (body: CreateThreadInput, o?: CallOptions) => {
      dataset(body?.dataset);
      return call("POST /v1/threads", "write", o, (init) => api.POST("/v1/threads", { body, ...init }));
    },
    get: async (threadId: string, o?: CallOptions) => {
      const id = segment("threadId", threadId);
      return call("GET /v1/threads/{id}", "read", o, (init) =>
        api.GET("/v1/threads/{id}", { params: { path: { id } }, ...init }),
      );
    },
    /** Tags and the episodic override. */
    update: async (threadId: string, body: UpdateThreadInput, o?: CallOptions) => {
      const id = segment("threadId", threadId);
      return call("PATCH /v1/threads/{id}", "write", o, (init) =>
        api.PATCH("/v1/threads/{id}", { params: { path: { id } }, body, ...init }),
      );
    },
    /** Ends the thread: its episode (summary, then facts) is extracted in the background. */
    end: async (threadId: string, o?: CallOptions) => {
      const id = segment("threadId", threadId);
      return call("POST /v1/threads/{id}/end", "write", o, (init) =>
        api.POST("/v1/threads/{id}/end", { params: { path: { id } }, ...init }),
      );
    },
  };
}

/** A thread's messages and its window. */
function messageCalls(api: Api, call: Call) {
  return {
    addMessage: async (threadId: string, message: AddMessageInput, o?: CallOptions) => {
      const id = segment("threadId", threadId);
      content("content", message?.content);
      return call("POST /v1/memory/working/threads/{threadId}/messages", "write", o, (init) =>
        api.POST("/v1/memory/working/threads/{threadId}/messages", {
          params: { path: { threadId: id } },
          body: message,
          ...init,
        }),
      );
    },
    /** Many messages in one request, all or nothing (at most 1000). */
    addMessages: async (threadId: string, messages: BatchMessage[], o?: CallOptions) => {
      const id = segment("threadId", threadId);
      batch(messages);
      return call("POST /v1/memory/working/threads/{threadId}/messages:batch", "write", o, (init) =>
        api.POST("/v1/memory/working/threads/{threadId}/messages:batch", {
          params: { path: { threadId: id } },
          body: { messages },
          ...init,
        }),
      );
    },
    /** Raw messages, cursor-paginated by sequence number (`before`). */
    messages: async (threadId: string, query?: ListMessagesQuery, o?: CallOptions) => {
      const id = segment("threadId", threadId);
      return call("GET /v1/memory/working/threads/{threadId}/messages", "read", o, (init) =>
        api.GET("/v1/memory/working/threads/{threadId}/messages", {
          params: { path: { threadId: id }, query },
          ...init,
        }),
      );
    },
    /** The LLM-ready window (no model call). */
    prepare: async (threadId: string, query?: { messageLimit?: number }, o?: CallOptions) => {
      const id = segment("threadId", threadId);
      return call("POST /v1/memory/working/threads/{threadId}/prepare", "read", o, (init) =>
        api.POST("/v1/memory/working/threads/{threadId}/prepare", {
          params: { path: { threadId: id }, query },
          ...init,
        }),
      );
    },
    /** Folds older messages into a summary (one model call). */
    compact: async (threadId: string, o?: CallOptions) => {
      const id = segment("threadId", threadId);
      return call("POST /v1/memory/working/threads/{threadId}/compact", "write", o, (init) =>
        api.POST("/v1/memory/working/threads/{threadId}/compact", { params: { path: { threadId: id } }, ...init }),
      );
    },
    stats: async (threadId: string, o?: CallOptions) => {
      const id = segment("threadId", threadId);
      return call("GET /v1/memory/working/threads/{threadId}/stats", "read", o, (init) =>
        api.GET("/v1/memory/working/threads/{threadId}/stats", { params: { path: { threadId: id } }, ...init }),
      );
    },
  };
}

/** The service's own reply, whole or streamed. */
function chatCalls(api: Api, call: Call, config: TransportConfig) {
  return {
    /**
     * The service's own reply: stores the message, recalls, calls its model, stores the reply.
     * Not retried on a 5xx: the user message is already stored then.
     */
    chat: async (threadId: string, body: ChatInput, o?: CallOptions) => {
      const id = segment("threadId", threadId);
      content("content", body?.content);
      // Without `Accept: text/event-stream` the answer is JSON (the document lists both types).
      return call<ChatReply>(
        "POST /v1/memory/working/threads/{threadId}/chat",
        "write-no-5xx",
        o,
        (init) =>
          api.POST("/v1/memory/working/threads/{threadId}/chat", {
            params: { path: { threadId: id } },
            body,
            ...init,
          }) as Promise<{ data?: ChatReply; error?: unknown; response: Response }>,
      );
    },
    /**
     * The same, streamed: `start`, `delta`… then `done` (the stored reply) or `error`. Retried
     * as `chat` is until the response's headers arrive (under its key; never on a 5xx): a repeat
     * meets the first attempt still streaming (409, waited for) or gets its kept events replayed
     * (`start`, the text as one `delta`, `done` or `error`). A stream broken, stalled or ended
     * before `done` (or `error`) after it started is not asked again: the loop throws
     * (`MemoryNetworkError`, `MemoryTimeoutError`) with the stream's `idempotencyKey`, to resume
     * the turn with. An abort, or leaving the loop early, closes the stream, and the service then
     * stores no reply. `timeoutMs` bounds the wait for the stream to start and each gap between its
     * chunks: a stream that stalls longer is closed and the loop throws `MemoryTimeoutError`.
     */
    chatStream: (threadId: string, body: ChatInput, o?: CallOptions): ChatStream => {
      // Chosen now, so that the stream names it before it is sent (and after it failed).
      const key = callKey(config, o);
      const events = async function* (): AsyncGenerator<ChatEvent> {
        const id = segment("threadId", threadId);
        content("content", body?.content);
        const label = "POST /v1/memory/working/threads/{threadId}/chat";
        // The timeout bounds the wait for the stream to start and each gap in it, not the whole reply.
        const stream = await call<ReadableStream<Uint8Array>>(
          label,
          "stream",
          { ...o, idempotencyKey: key, headers: { ...o?.headers, Accept: "text/event-stream" } },
          (init) =>
            api.POST("/v1/memory/working/threads/{threadId}/chat", {
              params: { path: { threadId: id } },
              body,
              parseAs: "stream",
              ...init,
            }) as Promise<{ data?: ReadableStream<Uint8Array>; error?: unknown; response: Response }>,
        );
        try {
          yield* readChatEvents(stream, o?.signal, o?.timeoutMs ?? config.timeoutMs, label);
        } catch (err) {
          // Cut, stalled or ended early once started: not asked again, but resumable under its key.
          if (err instanceof MemoryError && key !== false) err.idempotencyKey = key;
          throw err;
        }
      };
      return Object.assign(events(), { idempotencyKey: key === false ? undefined : key });
    },
  };
}

/** Calls on the whole memory: messages across threads, recall. */
function memoryCalls(api: Api, call: Call) {
  return {
    /** Messages for many threads in one request, all or nothing; each names its `threadId`. */
    addMessages: async (messages: CrossThreadMessage[], o?: CallOptions) => {
      batch(messages);
      for (const [i, m] of messages.entries()) required(`messages[${i}].threadId`, m?.threadId);
      return call("POST /v1/memory/working/messages:batch", "write", o, (init) =>
        api.POST("/v1/memory/working/messages:batch", { body: { messages }, ...init }),
      );
    },

    /**
     * What the service knows about a dataset, as a prompt-ready block (`context`). A read: retried.
     * Without `include`, asks for `["messages"]`: the conversation's best-matching messages come
     * back (`messages`) and in the block after the facts, so a message is recalled as soon as it is
     * stored, before any episode or fact. A given `include` is sent as it is (`[]`: the spec's
     * facts-only block).
     */
    recall: async (input: RecallInput, o?: CallOptions) => {
      dataset(input?.dataset);
      if (typeof input.query === "string" && characters(input.query) > 2000) {
        throw new MemoryValidationError("query", "must be at most 2000 characters");
      }
      const body: RecallInput = input.include === undefined ? { ...input, include: ["messages"] } : input;
      return call("POST /v1/memory/recall", "read", o, (init) => api.POST("/v1/memory/recall", { body, ...init }));
    },

    /**
     * What the project's model calls cost: the usage ledger over a range (default this month),
     * grouped by day, dataset, operation or model, and the monthly token budget. A read: retried.
     */
    usage: (query?: UsageQuery, o?: CallOptions) =>
      call("GET /v1/usage", "read", o, (init) => api.GET("/v1/usage", { params: { query }, ...init })),
  };
}

/** Episodes: list, search, read, wait for, archive, retry. */
function episodeCalls(api: Api, call: Call) {
  const get = async (episodeId: string, o?: CallOptions) => {
    const id = segment("episodeId", episodeId);
    return call("GET /v1/memory/episodic/episodes/{episodeId}", "read", o, (init) =>
      api.GET("/v1/memory/episodic/episodes/{episodeId}", { params: { path: { episodeId: id } }, ...init }),
    );
  };
  return {
    list: async (datasetName: string, query?: ListEpisodesQuery, o?: CallOptions) => {
      const d = segment("dataset", dataset(datasetName));
      return call("GET /v1/memory/episodic/datasets/{dataset}/episodes", "read", o, (init) =>
        api.GET("/v1/memory/episodic/datasets/{dataset}/episodes", {
          params: { path: { dataset: d }, query },
          ...init,
        }),
      );
    },
    /** Semantic search of completed episodes' summaries. */
    search: async (datasetName: string, q: string, query?: { limit?: number }, o?: CallOptions) => {
      const d = segment("dataset", dataset(datasetName));
      required("q", q);
      return call("GET /v1/memory/episodic/datasets/{dataset}/episodes/search", "read", o, (init) =>
        api.GET("/v1/memory/episodic/datasets/{dataset}/episodes/search", {
          params: { path: { dataset: d }, query: { ...query, q } },
          ...init,
        }),
      );
    },
    get,
    /**
     * Resolves with the episode (as `threads.end` names it) once it is `completed` (with `facts`,
     * once its fact extraction is done too), reading it every `intervalMs`. Rejects with
     * `MemoryEpisodeFailedError` when it is `failed` (the background retry may still redo it later:
     * `episodes.retry` re-queues it now), `archived` or `deleted`, and with `MemoryWaitTimeoutError`
     * after `timeoutMs`. A read that fails for a reason worth retrying (5xx, 429, a network error,
     * a timeout) is read again after `intervalMs` (or its Retry-After) until the deadline, whose
     * error then names the last failure (`lastError`); any other error (404, 401) rejects at once.
     */
    waitFor: async (episodeId: string, w: WaitForEpisodeOptions = {}): Promise<Episode> => {
      const id = segment("episodeId", episodeId);
      const timeoutMs = w.timeoutMs ?? 60_000;
      // One signal for the caller's abort and the deadline: it cancels a read or a pause at once.
      let last: Episode | undefined;
      let lastError: MemoryError | undefined;
      // A read in flight at the deadline is cut short: with no earlier failure, it is the last error.
      let readingSince: number | undefined;
      const wait = new AbortController();
      const timer = setTimeout(() => {
        const failure =
          lastError ?? (readingSince === undefined ? undefined : new MemoryTimeoutError(Date.now() - readingSince));
        wait.abort(new MemoryWaitTimeoutError(timeoutMs, last, failure));
      }, timeoutMs);
      const onAbort = () => wait.abort(w.signal?.reason);
      w.signal?.addEventListener("abort", onAbort, { once: true });
      try {
        w.signal?.throwIfAborted();
        for (;;) {
          let pauseMs = w.intervalMs ?? 250;
          try {
            // One attempt per poll: the loop is the retry, until the deadline.
            readingSince = Date.now();
            last = (await get(id, { signal: wait.signal, retries: 0 })).episode;
            lastError = undefined;
          } catch (err) {
            if (wait.signal.aborted || !pollRetryable(err)) throw err;
            lastError = err;
            if (err instanceof MemoryApiError && err.retryAfterMs !== undefined) {
              pauseMs = Math.max(pauseMs, err.retryAfterMs);
            }
          } finally {
            readingSince = undefined;
          }
          if (!lastError && last && episodeDone(last, w.facts ?? false)) return last;
          await sleep(pauseMs, wait.signal);
        }
      } finally {
        clearTimeout(timer);
        w.signal?.removeEventListener("abort", onAbort);
      }
    },
    /** Archives the episode: it leaves retrieval, its facts remain. */
    delete: async (episodeId: string, o?: CallOptions) => {
      const id = segment("episodeId", episodeId);
      return call("DELETE /v1/memory/episodic/episodes/{episodeId}", "write", o, (init) =>
        api.DELETE("/v1/memory/episodic/episodes/{episodeId}", { params: { path: { episodeId: id } }, ...init }),
      );
    },
    /** Re-queues a failed episode now. */
    retry: async (episodeId: string, o?: CallOptions) => {
      const id = segment("episodeId", episodeId);
      return call("POST /v1/memory/episodic/episodes/{episodeId}/retry", "write", o, (init) =>
        api.POST("/v1/memory/episodic/episodes/{episodeId}/retry", { params: { path: { episodeId: id } }, ...init }),
      );
    },
  };
}

/** Facts, entities and whole datasets. */
function semanticCalls(api: Api, call: Call) {
  return {
    facts: {
      list: async (datasetName: string, query?: ListFactsQuery, o?: CallOptions) => {
        const d = segment("dataset", dataset(datasetName));
        return call("GET /v1/memory/semantic/datasets/{dataset}/facts", "read", o, (init) =>
          api.GET("/v1/memory/semantic/datasets/{dataset}/facts", { params: { path: { dataset: d }, query }, ...init }),
        );
      },
      /** Invalidates the fact (it leaves retrieval; the row remains). */
      delete: async (datasetName: string, factId: string, o?: CallOptions) => {
        const d = segment("dataset", dataset(datasetName));
        const id = segment("factId", factId);
        return call("DELETE /v1/memory/semantic/datasets/{dataset}/facts/{factId}", "write", o, (init) =>
          api.DELETE("/v1/memory/semantic/datasets/{dataset}/facts/{factId}", {
            params: { path: { dataset: d, factId: id } },
            ...init,
          }),
        );
      },
    },

    entities: {
      list: async (datasetName: string, o?: CallOptions) => {
        const d = segment("dataset", dataset(datasetName));
        return call("GET /v1/memory/semantic/datasets/{dataset}/entities", "read", o, (init) =>
          api.GET("/v1/memory/semantic/datasets/{dataset}/entities", { params: { path: { dataset: d } }, ...init }),
        );
      },
      /** Live facts linked to an entity (an unknown entity has none). */
      facts: async (datasetName: string, name: string, o?: CallOptions) => {
        const d = segment("dataset", dataset(datasetName));
        const n = segment("name", name);
        return call("GET /v1/memory/semantic/datasets/{dataset}/entities/{name}/facts", "read", o, (init) =>
          api.GET("/v1/memory/semantic/datasets/{dataset}/entities/{name}/facts", {
            params: { path: { dataset: d, name: n } },
            ...init,
          }),
        );
      },
    },

    datasets: {
      /** Everything in the dataset, unpaginated. */
      export: async (datasetName: string, o?: CallOptions) => {
        const d = segment("dataset", dataset(datasetName));
        return call("GET /v1/memory/recall/datasets/{dataset}/export", "read", o, (init) =>
          api.GET("/v1/memory/recall/datasets/{dataset}/export", { params: { path: { dataset: d } }, ...init }),
        );
      },
      /** Hard-erases every thread, message, episode, fact and entity of the dataset. No undo. */
      delete: async (datasetName: string, o?: CallOptions) => {
        const d = segment("dataset", dataset(datasetName));
        return call("DELETE /v1/memory/recall/datasets/{dataset}", "write", o, (init) =>
          api.DELETE("/v1/memory/recall/datasets/{dataset}", { params: { path: { dataset: d } }, ...init }),
        );
      },
    },
  };
}

/** Whether a failed poll of `waitFor` is polled again (5xx, 429, network errors, timeouts) rather than thrown. */
function pollRetryable(err: unknown): err is MemoryError {
  if (err instanceof MemoryApiError) return isRetryable({ kind: "status", status: err.status }, "safe");
  return err instanceof MemoryNetworkError || err instanceof MemoryTimeoutError;
}

/** Whether a wait for the episode is over (true) or goes on (false); throws when it never will be. */
function episodeDone(episode: Episode, facts: boolean): boolean {
  if (episode.status === "failed" || episode.status === "archived" || episode.status === "deleted") {
    throw new MemoryEpisodeFailedError(episode);
  }
  return episode.status === "completed" && (!facts || episode.extractionReport !== null);
}

function batch(messages: unknown): void {
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new MemoryValidationError("messages", "must be a non-empty array");
  }
  if (messages.length > 1000) throw new MemoryValidationError("messages", "at most 1000 per request");
  for (const [i, m] of messages.entries()) content(`messages[${i}].content`, (m as { content?: unknown })?.content);
}

export type MemoryClient = ReturnType<typeof createMemoryClient>;
