import OpenAI from "openai";
import type { ChatCompletionChunk } from "openai/resources/chat/completions";
import type { Stream } from "openai/streaming";
import { z } from "zod";
import type { Config, ProviderEndpoint } from "../config";
import { NoProviderError, ProviderError } from "../errors";
import { storable, storableModelText, withoutLoneSurrogates } from "../inputs";
import { type ModelCall, observeModelCall } from "../telemetry";

/**
 * The model provider as the domain sees it. One implementation, over the `openai` SDK, so any
 * OpenAI-compatible server (vLLM, Ollama, a gateway, the tests' fake) serves it; the SDK brings
 * timeouts and retries with backoff on 429, 5xx and connection errors.
 */
export interface Llm {
  /**
   * One Chat Completions call with Structured Outputs; the answer is parsed with `schema`. A server
   * without JSON-schema output (it answers 400, or text that is not JSON) is asked again in JSON
   * mode with the schema in the prompt, and once more with the validation error when the answer
   * does not match; after a 400 the client stays in JSON mode.
   */
  structured<T extends z.ZodType>(request: StructuredRequest<T>): Promise<z.infer<T>>;
  /** A free-text Chat Completions call. */
  complete(request: TextRequest): Promise<Completion>;
  /**
   * The same call, streamed. Resolves once the provider accepted the request (its headers
   * arrived; failures up to then are retried like `complete`'s and rejected as ProviderError).
   * The meter hears of the call when the stream ends (its usage chunk), fails or is aborted.
   */
  stream(request: TextRequest): Promise<CompletionStream>;
  /**
   * One Embeddings call for the whole batch, vectors in input order, each checked to have
   * EMBEDDING_DIMENSIONS numbers. A 400 to `dimensions` is asked again without it, once per client.
   */
  embed(texts: string[], meter?: Meter, signal?: AbortSignal): Promise<number[][]>;
  /**
   * The size of the vectors the embedding model returns for the configured model and dimensions:
   * one Embeddings call of a short probe text, without the size check `embed` makes.
   */
  embeddingSize(): Promise<number>;
  /**
   * One call to the rerank endpoint (RERANK_BASE_URL): `POST {base}/rerank` with every document,
   * no retry (recall waits for it under a deadline). The scores as the endpoint gave them, items
   * without an integer index or a numeric score left out; a non-2xx answer, a body without a
   * `results` array or no endpoint configured is a ProviderError.
   */
  rerank(request: RerankRequest): Promise<RerankScore[]>;
}

export interface RerankRequest {
  query: string;
  documents: string[];
  signal?: AbortSignal;
  meter?: Meter;
}

/** A free-text call: the system prompt, then the conversation. */
export interface TextRequest {
  system: string;
  messages: ChatMessage[];
  maxTokens?: number;
  meter?: Meter;
  /** Ends the call, its retries included (a caller's deadline: the SDK's timeout is per attempt). */
  signal?: AbortSignal;
}

/**
 * One call to the provider as it ended, with the tokens the provider reported for it: a count it
 * did not report is null (unknown, not zero). `error`: no answer (a failure after the SDK's own
 * retries, or an answer without content); `aborted`: a stream the caller stopped reading.
 */
export interface ProviderCall {
  kind: "chat" | "embedding" | "rerank";
  model: string;
  inputTokens: number | null;
  outputTokens: number | null;
  totalTokens: number | null;
  outcome: "ok" | "error" | "aborted";
  /**
   * Why a call that ended with the meter (a stream) did not end ok, for metrics and traces (its
   * HTTP status, a stall's timeout, the reader's abort); the ledger keeps only the outcome.
   */
  error?: unknown;
  /**
   * A request that failed and that the SDK sent again (its `maxRetries`): a call of its own to the
   * ledger, part of the method's one call to metrics and traces.
   */
  retried?: true;
}

/**
 * Told of every provider call a method makes, once each, as it ends (lib/usage's collector is
 * one: it records the calls in the ledger). A structured call in JSON mode or an embedding call
 * asked again without `dimensions` is several calls.
 */
export type Meter = (call: ProviderCall) => void;

const MAX_TOKEN_COUNT = 2 ** 31 - 1;

/** The usage object of a Chat Completions or Embeddings answer, as the meter takes it. */
export function reportedTokens(
  usage: { prompt_tokens?: unknown; completion_tokens?: unknown; total_tokens?: unknown } | null | undefined,
) {
  // What the ledger's integer columns hold; a count past them is no count (unknown), not a failure.
  const count = (n: unknown) =>
    typeof n === "number" && Number.isFinite(n) && n >= 0 && n <= MAX_TOKEN_COUNT ? Math.round(n) : null;
  return {
    inputTokens: count(usage?.prompt_tokens),
    outputTokens: count(usage?.completion_tokens),
    totalTokens: count(usage?.total_tokens),
  };
}

const NO_TOKENS = { inputTokens: null, outputTokens: null, totalTokens: null };

/**
 * The model a call is recorded under: the one the provider says answered, when it names one as
 * text PostgreSQL can store (`storable`) of a sane length, otherwise the one asked for. The ledger's
 * rows ride in other requests' statements (lib/usage/backlog.ts): nothing a provider answers may
 * make one fail.
 */
export function recordedModel(answered: unknown, asked: string): string {
  const ok = typeof answered === "string" && answered.length > 0 && answered.length <= 200 && storable(answered);
  return ok ? answered : asked;
}

/** Runs one provider call and tells the meter how it ended (`tokens` of the answer when it came). */
async function metered<R>(
  meter: Meter | undefined,
  kind: ProviderCall["kind"],
  model: string,
  call: (attempts: AttemptOptions) => Promise<R>,
  tokens: (answer: R) => ReturnType<typeof reportedTokens>,
  answered: (answer: R) => { model?: string; ok: boolean } = () => ({ ok: true }),
): Promise<R> {
  let answer: R;
  try {
    answer = await call(attemptsMetered(meter, kind, model));
  } catch (err) {
    // No provider configured: no call was made, nothing to record.
    if (!(err instanceof NoProviderError)) meter?.({ kind, model, ...NO_TOKENS, outcome: "error" });
    throw err;
  }
  // The answer is the provider's: a 200 whose body is not the shape asked for (no `choices`, text
  // instead of JSON) is a call that reached it and gave nothing usable, recorded as such.
  let seen: { model?: string; ok: boolean; counts: ReturnType<typeof reportedTokens> };
  try {
    seen = { ...answered(answer), counts: tokens(answer) };
  } catch {
    seen = { ok: false, counts: NO_TOKENS };
  }
  meter?.({ kind, model: recordedModel(seen.model, model), ...seen.counts, outcome: seen.ok ? "ok" : "error" });
  return answer;
}

/**
 * A `fetchOptions` property, never sent: told when each HTTP attempt of one SDK call ends. The SDK
 * retries a failed request by itself (`maxRetries`), and every attempt reached the provider.
 */
const ON_ATTEMPT = "onProviderAttempt";
/** The SDK's per-request options (its RequestOptions type is internal), as create() takes them. */
type AttemptOptions = Pick<NonNullable<Parameters<OpenAI["embeddings"]["create"]>[1]>, "fetchOptions">;

/**
 * The SDK call's request options that meter its retried attempts: when an attempt ends after an
 * earlier one, the earlier one failed and was sent again, and the meter hears of it then (an
 * error without counts, `retried`). The last attempt is the call's own outcome, metered by the
 * caller, so a call of n attempts is n calls to the meter.
 */
function attemptsMetered(meter: Meter | undefined, kind: ProviderCall["kind"], model: string): AttemptOptions {
  let ended = 0;
  const onAttempt = () => {
    if (ended++ > 0) meter?.({ kind, model, ...NO_TOKENS, outcome: "error", retried: true });
  };
  return { fetchOptions: { [ON_ATTEMPT]: onAttempt } as AttemptOptions["fetchOptions"] };
}

/** The SDK call's request options with the caller's abort signal, when it gave one. */
function withSignal(
  attempts: AttemptOptions,
  signal: AbortSignal | undefined,
): AttemptOptions & { signal?: AbortSignal } {
  return signal ? { ...attempts, signal } : attempts;
}

/** `fetch` telling each request's ON_ATTEMPT (taken out of what is sent) when it ends. */
function attemptsObserved(base: typeof fetch): typeof fetch {
  return async (input, init) => {
    const { [ON_ATTEMPT]: onAttempt, ...sent } = (init ?? {}) as RequestInit & { [ON_ATTEMPT]?: () => void };
    try {
      return await base(input, sent);
    } finally {
      onAttempt?.();
    }
  };
}

/** One document's relevance as the endpoint scored it: `index` into the request's documents. */
export interface RerankScore {
  index: number;
  score: number;
}

export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

export interface StructuredRequest<T extends z.ZodType> {
  /** Schema name sent to the provider (`json_schema.name`). */
  name: string;
  schema: T;
  system: string;
  user: string;
  /** Ends the call early (a caller with a deadline, like recall's reranker). */
  signal?: AbortSignal;
  /** Retries of a failed request; the client's own setting when absent. */
  maxRetries?: number;
  meter?: Meter;
}

export interface Completion {
  text: string;
  model: string;
  tokens: { input?: number; output?: number; total?: number };
}

/**
 * A reply being streamed. Iterate once for the text deltas; a stream that breaks, stalls, ends
 * without a finish reason or carries no text throws a ProviderError from the iteration. After the
 * iteration ended normally, `completion()` gives the whole reply with the provider's usage.
 */
export interface CompletionStream extends AsyncIterable<string> {
  /** The full reply; throws unless the iteration ran to a complete reply. */
  completion(): Completion;
  /** Stop reading and close the provider connection; the iteration then ends without an error. */
  abort(): void;
}

/**
 * Sent as the key to a server configured by OPENAI_BASE_URL alone (Ollama, vLLM or llama.cpp
 * server without `--api-key`): the SDK needs one, such servers ignore it.
 */
export const PLACEHOLDER_API_KEY = "no-key";

/** The probe text of `embeddingSize`. */
export const EMBEDDING_PROBE_TEXT = "embedding size probe";

export interface LlmOptions {
  timeoutMs?: number;
  maxRetries?: number;
  fetch?: typeof fetch;
}

/** The SDK's client, made on first use; a call without a configured provider is a NoProviderError. */
type OpenAiOf = () => OpenAI;

export function createLlm(config: Config, options: LlmOptions = {}): Llm {
  const { llmModel } = config.openai;
  const openai = lazyClient(config.openai, options);
  const structured = structuredCalls(openai, llmModel);
  // Its own client: EMBEDDING_BASE_URL may name another server (the chat's when unset).
  const embeddings = embeddingCalls(lazyClient(config.embeddings, options), config.openai);
  const chat = (kind: string, stream?: boolean): ModelCall => ({
    operation: "chat",
    kind,
    model: llmModel,
    serverAddress: hostOf(config.openai.baseUrl),
    ...(stream ? { stream } : {}),
  });
  const embedding = (kind: string): ModelCall => ({
    operation: "embeddings",
    kind,
    model: config.openai.embeddingModel,
    serverAddress: hostOf(config.embeddings.baseUrl),
  });
  const rerank: ModelCall = {
    operation: "rerank",
    kind: "rerank",
    model: config.rerank.model ?? "",
    serverAddress: hostOf(config.rerank.baseUrl),
  };
  return {
    structured: (request) =>
      providerCall(`Model call (${request.name})`, () =>
        observed(chat(request.name), request.meter, (meter) => structured({ ...request, meter })),
      ),
    complete: (request) =>
      providerCall("Model call", () =>
        observed(chat("completion"), request.meter, async (meter) =>
          completionOf(
            await metered(
              meter,
              "chat",
              llmModel,
              (attempts) =>
                openai().chat.completions.create(chatParams(llmModel, request), withSignal(attempts, request.signal)),
              (answer) => reportedTokens(answer.usage),
              (answer) => ({ model: answer.model, ok: Boolean(answer.choices?.[0]?.message?.content) }),
            ),
          ),
        ),
      ),
    stream: (request) =>
      providerCall("Model call", () =>
        observed(
          chat("stream", true),
          request.meter,
          async (meter) => {
            let stream: Stream<ChatCompletionChunk>;
            try {
              stream = await openai().chat.completions.create(
                { ...chatParams(llmModel, request), stream: true, stream_options: { include_usage: true } },
                attemptsMetered(meter, "chat", llmModel),
              );
            } catch (err) {
              // Accepted, the meter hears of it when the stream ends; refused, now.
              if (!(err instanceof NoProviderError)) {
                meter?.({ kind: "chat", model: llmModel, ...NO_TOKENS, outcome: "error", error: err });
              }
              throw err;
            }
            return completionStream(stream, llmModel, options.timeoutMs ?? 60_000, meter);
          },
          { endsWithMeter: true },
        ),
      ),
    embed: (texts, meter, signal) =>
      providerCall("Embedding call", () =>
        observed(embedding("embedding"), meter, (seen) => embeddings.embed(texts, seen, signal)),
      ),
    embeddingSize: () =>
      providerCall("Embedding call", () => observed(embedding("embedding_size"), undefined, () => embeddings.size())),
    rerank: (request) =>
      providerCall("Rerank call", () =>
        observed(rerank, request.meter, (meter) =>
          rerankCall(config.rerank, { ...request, meter }, options.fetch ?? fetch),
        ),
      ),
  };
}

function hostOf(baseUrl: string | undefined): string | undefined {
  if (!baseUrl) return undefined;
  try {
    return new URL(baseUrl).hostname;
  } catch {
    return undefined;
  }
}

/**
 * One method call as its observers (lib/telemetry.ts: metrics and traces) see it: from start to
 * end, with the tokens of every provider request it made, read from what the meter hears (JSON-mode
 * retries and "dimensions refused" retries included), then passed on to the caller's meter. A
 * stream ends when its meter hears of it (the stream's end, failure or abort), not when it opens.
 */
async function observed<R>(
  call: ModelCall,
  meter: Meter | undefined,
  run: (meter: Meter | undefined) => Promise<R>,
  options: { endsWithMeter?: boolean } = {},
): Promise<R> {
  const end = observeModelCall(call);
  const usage = { input: 0, output: 0 };
  let reported = false;
  let responseModel: string | undefined;
  let ended = false;
  const finish = (error?: unknown) => {
    if (ended) return;
    ended = true;
    end({ usage: reported ? usage : undefined, responseModel, error });
  };
  const seen: Meter = (c) => {
    if (c.retried) {
      meter?.(c);
      return;
    }
    if (c.inputTokens !== null || c.outputTokens !== null) {
      reported = true;
      usage.input += c.inputTokens ?? 0;
      usage.output += c.outputTokens ?? 0;
    }
    responseModel = c.model;
    meter?.(c);
    if (options.endsWithMeter) finish(c.outcome === "ok" ? undefined : (c.error ?? c.outcome));
  };
  try {
    const result = await run(seen);
    if (!options.endsWithMeter) finish();
    return result;
  } catch (err) {
    finish(err);
    throw err;
  }
}

function lazyClient({ apiKey, baseUrl }: ProviderEndpoint, options: LlmOptions): OpenAiOf {
  let client: OpenAI | undefined;
  return () => {
    if (!apiKey && !baseUrl) throw new NoProviderError();
    client ??= new OpenAI({
      apiKey: apiKey ?? PLACEHOLDER_API_KEY,
      baseURL: baseUrl,
      timeout: options.timeoutMs ?? 60_000,
      maxRetries: options.maxRetries ?? 2,
      // The SDK's own log lines (OPENAI_LOG) are not the service's JSON lines: its failures reach
      // the logs as the service reports them instead.
      logLevel: "off",
      // Called as a plain function: the Worker's fetch refuses any other `this`.
      fetch: attemptsObserved((input, init) => (options.fetch ?? fetch)(input, init)),
    });
    return client;
  };
}

/** Every failure of a provider call as a ProviderError naming the call. */
async function providerCall<R>(what: string, run: () => Promise<R>): Promise<R> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof ProviderError) throw err;
    throw new ProviderError(`${what} failed: ${describe(err)}`, { cause: err });
  }
}

/** A server refusing a request option it does not support (400; 422 from some). */
export const isRefusal = (err: unknown) => err instanceof OpenAI.APIError && (err.status === 400 || err.status === 422);

/**
 * A refusal for the prompt's length (OpenAI's `context_length_exceeded`; vLLM's and llama.cpp's
 * messages): no other response format would be accepted either.
 */
export const isContextLengthRefusal = (err: unknown): boolean =>
  isRefusal(err) &&
  ((err as InstanceType<typeof OpenAI.APIError>).code === "context_length_exceeded" ||
    /context length|context size|context window|maximum context|too many tokens|too long|reduce the length/i.test(
      (err as Error).message,
    ));

/**
 * A provider call refused for its prompt's length (isContextLengthRefusal, or a 413), bare or as
 * the cause of the ProviderError a call throws: a shorter prompt may be accepted. Other refusals
 * (an unsupported option, a model the key may not use) are not worth a shorter try.
 */
export const isLengthRefusal = (err: unknown): boolean => {
  const answer = providerAnswerOf(err);
  return isContextLengthRefusal(answer) || isTooLarge(answer);
};

/**
 * A provider call refused for what it was sent, which sending it again will not change: an input
 * longer than the model's window or a request over its token limit (400, 422; 413 from servers
 * that measure the body).
 */
export const isInputRefusal = (err: unknown): boolean => {
  const answer = providerAnswerOf(err);
  return isRefusal(answer) || isTooLarge(answer);
};

/** What the provider answered behind a failed call: the cause of the ProviderError a call throws, or the error itself. */
const providerAnswerOf = (err: unknown) => (err instanceof ProviderError ? err.cause : err);

/** A 413: a server that measures the request's body refused it as too large. */
const isTooLarge = (answer: unknown) => answer instanceof OpenAI.APIError && answer.status === 413;

/** The free-text call's parameters: the system prompt first, then the conversation. */
export function chatParams(model: string, request: { system: string; messages: ChatMessage[]; maxTokens?: number }) {
  return {
    model,
    messages: [{ role: "system" as const, content: request.system }, ...request.messages],
    ...(request.maxTokens ? { max_tokens: request.maxTokens } : {}),
  };
}

/** A JSON.parse reviver: the strings of a structured answer as the database can store them. */
function storableStrings(_key: string, value: unknown): unknown {
  return typeof value === "string" ? storableModelText(value) : value;
}

/**
 * The reply as the database can store it (`storableModelText`), and the provider's usage; a reply
 * without text, or of whitespace only, is a failure (a compaction summary is stored trimmed: an
 * empty one would replace the turns it folds).
 */
export function completionOf(response: Pick<OpenAI.ChatCompletion, "choices" | "model" | "usage">): Completion {
  const raw = response.choices?.[0]?.message?.content;
  const text = raw ? storableModelText(raw) : raw;
  if (!text?.trim()) throw new ProviderError("Model call returned no content");
  return {
    text,
    model: response.model,
    tokens: {
      input: response.usage?.prompt_tokens,
      output: response.usage?.completion_tokens,
      total: response.usage?.total_tokens,
    },
  };
}

/** Whether an Embeddings answer's `data` holds one vector per text (the size is checked by embed). */
function vectorsOfSize(data: unknown, texts: number): boolean {
  return Array.isArray(data) && data.length === texts && data.every((d) => Array.isArray(d?.embedding));
}

/** The vectors in input order, each of the configured size, one per text. */
export function vectorsOf(data: { index: number; embedding: number[] }[], texts: number, dimensions: number) {
  // A body that is not the shape asked for (no `data` array) is no vectors, said plainly.
  const vectors = (Array.isArray(data) ? [...data] : []).sort((a, b) => a.index - b.index).map((d) => d.embedding);
  if (vectors.length !== texts || vectors.some((v) => v.length !== dimensions)) {
    throw new ProviderError(
      `Embedding call returned ${vectors.length} vectors of size ${vectors[0]?.length} (expected ${texts} of ${dimensions})`,
    );
  }
  return vectors;
}

function embeddingCalls(openai: OpenAiOf, { embeddingModel, embeddingDimensions }: Config["openai"]) {
  /**
   * Cleared once the server refused `dimensions` and answered without it (vLLM with a model that
   * is not Matryoshka answers 400 to any `dimensions`): the model's own size is then checked.
   */
  let sendDimensions = true;
  const embeddings = async (input: string[], meter?: Meter, signal?: AbortSignal) => {
    const request = { model: embeddingModel, input, encoding_format: "float" as const };
    const create = (body: OpenAI.EmbeddingCreateParams) =>
      metered(
        meter,
        "embedding",
        embeddingModel,
        (attempts) => openai().embeddings.create(body, withSignal(attempts, signal)),
        (answer) => reportedTokens(answer.usage),
        (answer) => ({ model: answer.model, ok: vectorsOfSize(answer.data, body.input.length) }),
      );
    if (!sendDimensions) return create(request);
    try {
      return await create({ ...request, dimensions: embeddingDimensions });
    } catch (err) {
      if (!isRefusal(err) || isContextLengthRefusal(err)) throw err;
      const response = await create(request);
      sendDimensions = false;
      return response;
    }
  };
  return {
    async embed(texts: string[], meter?: Meter, signal?: AbortSignal) {
      if (texts.length === 0) return [];
      return vectorsOf((await embeddings(texts, meter, signal)).data, texts.length, embeddingDimensions);
    },
    async size() {
      const vector = (await embeddings([EMBEDDING_PROBE_TEXT])).data?.[0]?.embedding;
      if (!vector) throw new ProviderError("Embedding call returned no vector");
      return vector.length;
    },
  };
}

type ChatJson = (
  messages: ChatMessage[],
  responseFormat: OpenAI.ChatCompletionCreateParams["response_format"],
  request: Pick<StructuredRequest<z.ZodType>, "name" | "signal" | "maxRetries" | "meter">,
) => Promise<string>;

/** One JSON answer: the content of the first choice, which must not be empty. */
function chatJsonOf(openai: OpenAiOf, model: string): ChatJson {
  return async (messages, responseFormat, { name, signal, maxRetries, meter }) => {
    const response = await metered(
      meter,
      "chat",
      model,
      (attempts) =>
        openai().chat.completions.create(
          { model, messages, response_format: responseFormat },
          { ...withSignal(attempts, signal), ...(maxRetries !== undefined ? { maxRetries } : {}) },
        ),
      (answer) => reportedTokens(answer.usage),
      (answer) => ({ model: answer.model, ok: Boolean(answer.choices?.[0]?.message?.content) }),
    );
    const content = response.choices?.[0]?.message?.content;
    if (!content) throw new ProviderError(`Model call (${name}) returned no content`);
    return content;
  };
}

/** Structured Outputs first; JSON mode where the server refuses or ignores a JSON schema. */
function structuredCalls(openai: OpenAiOf, model: string) {
  const chatJson = chatJsonOf(openai, model);
  /** Set once the server refused JSON-schema output and answered in JSON mode: skip the refused call. */
  let jsonMode = false;
  return async <T extends z.ZodType>(request: StructuredRequest<T>): Promise<z.infer<T>> => {
    if (jsonMode) return structuredJsonMode(chatJson, request);
    let content: string;
    try {
      content = await chatJson(structuredMessages(request), jsonSchemaFormat(request), request);
    } catch (err) {
      if (!isRefusal(err) || isContextLengthRefusal(err)) throw err;
      // JSON mode accepted where JSON schema was refused: this server's calls skip the refusal.
      return structuredJsonMode(chatJson, request, () => {
        jsonMode = true;
      });
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(content, storableStrings);
    } catch {
      // Accepted but ignored (text around the JSON, or no JSON): JSON mode with the schema in the prompt.
      return structuredJsonMode(chatJson, request);
    }
    const result = request.schema.safeParse(parsed);
    if (!result.success) {
      throw new ProviderError(`Model call (${request.name}) returned JSON that does not match the schema`);
    }
    return result.data;
  };
}

const structuredMessages = (request: StructuredRequest<z.ZodType>): ChatMessage[] => [
  { role: "system", content: request.system },
  { role: "user", content: request.user },
];

/** Structured Outputs' strict JSON-schema response format for the request's schema. */
export const jsonSchemaFormat = (request: StructuredRequest<z.ZodType>) => ({
  type: "json_schema" as const,
  json_schema: { name: request.name, strict: true, schema: strictJsonSchema(request.schema) },
});

/** The repair turn of JSON mode: the answer as it was, then what is wrong with it. */
export function repairTurn(content: string, problem: string): ChatMessage[] {
  return [
    { role: "assistant", content },
    {
      role: "user",
      content: `That answer is not valid: ${problem}. Answer again with only the corrected JSON object, matching the schema.`,
    },
  ];
}

/** JSON mode: the schema in the prompt, the answer validated, one repair turn with the error. */
async function structuredJsonMode<T extends z.ZodType>(
  chatJson: ChatJson,
  request: StructuredRequest<T>,
  onAccepted = () => {},
): Promise<z.infer<T>> {
  const messages: ChatMessage[] = [
    { role: "system", content: jsonModeSystem(request) },
    { role: "user", content: request.user },
  ];
  let content = await chatJson(messages, { type: "json_object" }, request);
  onAccepted();
  let checked = checkJson(request.schema, content);
  if (checked.ok) return checked.data;
  messages.push(...repairTurn(content, checked.problem));
  content = await chatJson(messages, { type: "json_object" }, request);
  checked = checkJson(request.schema, content);
  if (checked.ok) return checked.data;
  throw new ProviderError(
    `Model call (${request.name}) ${checked.invalidJson ? "returned invalid JSON" : "returned JSON that does not match the schema"} in JSON mode, also after one repair: ${checked.problem}`,
  );
}

/** The rerank call, told to the meter once however it ends (none without an endpoint: no call). */
async function rerankCall(
  endpoint: Config["rerank"],
  request: RerankRequest,
  fetchImpl: typeof fetch,
): Promise<RerankScore[]> {
  if (!endpoint.baseUrl) throw new ProviderError("No rerank endpoint is configured (RERANK_BASE_URL)");
  const model = endpoint.model ?? "rerank";
  let tokens: ReturnType<typeof reportedTokens> = NO_TOKENS;
  try {
    const scores = await rerankScores(endpoint.baseUrl, endpoint, request, fetchImpl, (reported) => {
      tokens = reported;
    });
    request.meter?.({ kind: "rerank", model, ...tokens, outcome: "ok" });
    return scores;
  } catch (err) {
    request.meter?.({ kind: "rerank", model, ...tokens, outcome: "error" });
    throw err;
  }
}

/** `POST {baseUrl}/rerank` as vLLM, llama.cpp server, Jina and Cohere serve it. */
async function rerankScores(
  baseUrl: string,
  endpoint: Config["rerank"],
  request: RerankRequest,
  fetchImpl: typeof fetch,
  onUsage: (tokens: ReturnType<typeof reportedTokens>) => void,
): Promise<RerankScore[]> {
  const base = baseUrl.replace(/\/+$/, "");
  // The endpoint's own URL pasted from a provider's docs (…/v1/rerank) works as well as its base.
  const response = await fetchImpl(base.endsWith("/rerank") ? base : `${base}/rerank`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(endpoint.apiKey ? { authorization: `Bearer ${endpoint.apiKey}` } : {}),
    },
    body: JSON.stringify({
      ...(endpoint.model ? { model: endpoint.model } : {}),
      query: request.query,
      documents: request.documents,
      top_n: request.documents.length,
    }),
    signal: request.signal,
  });
  const text = await response.text();
  if (!response.ok) {
    throw new ProviderError(`Rerank call failed: endpoint answered ${response.status}: ${text.slice(0, 200)}`);
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new ProviderError(`Rerank call returned invalid JSON: ${text.slice(0, 200)}`);
  }
  // Jina and vLLM report `usage.total_tokens`; Cohere bills search units instead (unknown here).
  const usage = (body as { usage?: { prompt_tokens?: unknown; total_tokens?: unknown } } | null)?.usage;
  onUsage(reportedTokens({ prompt_tokens: usage?.prompt_tokens, total_tokens: usage?.total_tokens }));
  const results = (body as { results?: unknown } | null)?.results;
  if (!Array.isArray(results)) throw new ProviderError("Rerank call returned no results array");
  return results.flatMap((item) => {
    const { index, relevance_score, score } = (item ?? {}) as Record<string, unknown>;
    // Jina, Cohere and vLLM name it relevance_score; some servers and gateways, score.
    const value = typeof relevance_score === "number" ? relevance_score : score;
    return Number.isInteger(index) && typeof value === "number" && Number.isFinite(value)
      ? [{ index: index as number, score: value }]
      : [];
  });
}

/** The system prompt of JSON mode: the request's own, then the schema the answer must match. */
export function jsonModeSystem(request: StructuredRequest<z.ZodType>): string {
  return `${request.system}

Answer with one JSON object and nothing else (no prose, no code fence) that matches the JSON Schema named "${request.name}":
${JSON.stringify(strictJsonSchema(request.schema))}`;
}

type Checked<T> = { ok: true; data: T } | { ok: false; invalidJson: boolean; problem: string };

/** Parse and validate a JSON-mode answer; a code fence around the object is tolerated. */
export function checkJson<T extends z.ZodType>(schema: T, content: string): Checked<z.infer<T>> {
  const fenced = /^\s*```(?:json)?\s*([\s\S]*?)\s*```\s*$/i.exec(content);
  let parsed: unknown;
  try {
    parsed = JSON.parse(fenced ? fenced[1] : content, storableStrings);
  } catch (err) {
    return { ok: false, invalidJson: true, problem: `it is not valid JSON (${(err as Error).message})` };
  }
  const result = schema.safeParse(parsed);
  if (result.success) return { ok: true, data: result.data };
  const issues = result.error.issues
    .slice(0, 5)
    .map((i) => `${i.path.length ? i.path.join(".") : "(root)"}: ${i.message}`)
    .join("; ");
  return { ok: false, invalidJson: false, problem: `it does not match the schema (${issues})` };
}

/** What a completion stream has read so far, and how it stopped. */
export interface StreamState {
  text: string;
  model: string;
  usage: ChatCompletionChunk["usage"];
  finished: boolean;
  complete: boolean;
  aborted: boolean;
  stalled: boolean;
  consumed: boolean;
  /** A high surrogate that ended the last delta: its low half may be the next chunk's first. */
  held: string;
}

/** A stream's state before its first chunk: the model asked for until a chunk names the one served. */
export function newStreamState(model: string): StreamState {
  return {
    text: "",
    model,
    usage: undefined,
    finished: false,
    complete: false,
    aborted: false,
    stalled: false,
    consumed: false,
    held: "",
  };
}

/** Folds one chunk into the state; returns the text it adds, if any. */
export function takeChunk(state: StreamState, chunk: ChatCompletionChunk): string | undefined {
  if (chunk.model) state.model = chunk.model;
  if (chunk.usage) state.usage = chunk.usage;
  const choice = chunk.choices[0];
  if (choice?.finish_reason) state.finished = true;
  const raw = choice?.delta?.content;
  if (!raw) return undefined;
  const { text, held } = clientText(state.held, raw.replaceAll("\u0000", ""));
  state.held = held;
  state.text += text;
  return text || undefined;
}

/**
 * A delta as a client can show it and the database store it: what was held back from the last
 * one first, without NUL characters or lone surrogates (U+FFFD, as in the stored reply). A pair
 * can be split across two chunks, so a high surrogate ending the delta is held for the next.
 */
export function clientText(held: string, raw: string): { text: string; held: string } {
  const s = held + raw;
  const last = s.charCodeAt(s.length - 1);
  const keep = last >= 0xd800 && last <= 0xdbff ? 1 : 0;
  return { text: withoutLoneSurrogates(s.slice(0, s.length - keep)), held: s.slice(s.length - keep) };
}

/** A high surrogate still held when the stream ended: it had no low half (U+FFFD). */
export function heldAtEnd(state: StreamState): string | undefined {
  if (!state.held) return undefined;
  state.held = "";
  state.text += "\ufffd";
  return "\ufffd";
}

/** Why a stream that ended without an abort is not a reply (null: it is one). */
export function streamEndProblem(state: StreamState, idleMs: number): string | null {
  if (state.stalled) return `Model stream stalled: no data for ${idleMs} ms`;
  if (!state.finished) return "Model stream ended before the reply was complete";
  if (!state.text) return "Model call returned no content";
  return null;
}

/**
 * The SDK's timeout ends when the headers arrive, so a stream that stops sending would hang its
 * reader for good: here `idleMs` without a chunk from the provider fails it. Time the consumer
 * spends between reads (writing to a slow client) does not count.
 */
function completionStream(
  stream: Stream<ChatCompletionChunk>,
  requestedModel: string,
  idleMs: number,
  meter: Meter | undefined,
) {
  const state = newStreamState(requestedModel);
  const result: CompletionStream = {
    async *[Symbol.asyncIterator]() {
      if (state.consumed) throw new Error("A completion stream can be read only once");
      state.consumed = true;
      let failure: unknown;
      try {
        yield* readChunks(stream, state, idleMs);
        // An abort (ours or the stall timer's) ends the SDK's iteration quietly.
        if (state.aborted) return;
        const problem = streamEndProblem(state, idleMs);
        if (problem) throw new ProviderError(problem);
        state.complete = true;
      } catch (err) {
        failure = err;
        throw err;
      } finally {
        // Once, however the reading ended (a reader that stops early is an abort too).
        const outcome = state.complete ? "ok" : failure !== undefined || state.stalled ? "error" : "aborted";
        const error = outcome === "aborted" ? READER_ABORTED : failure;
        meter?.({ kind: "chat", model: state.model, ...reportedTokens(state.usage), outcome, error });
      }
    },
    completion() {
      if (!state.complete) throw new ProviderError("Model stream has not completed");
      // Storable already: every delta went through clientText, and the held half through heldAtEnd.
      const { text, model, usage } = state;
      return {
        text,
        model,
        tokens: { input: usage?.prompt_tokens, output: usage?.completion_tokens, total: usage?.total_tokens },
      };
    },
    abort() {
      state.aborted = true;
      stream.controller.abort();
    },
  };
  return result;
}

/** Why a stream the reader stopped early did not end ok (metrics' and traces' `aborted`). */
const READER_ABORTED = Object.assign(new Error("The reader stopped the stream"), { name: "AbortError" });

/** The provider's deltas, with the stall timer re-armed at each chunk. */
async function* readChunks(stream: Stream<ChatCompletionChunk>, state: StreamState, idleMs: number) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const arm = () => {
    timer = setTimeout(() => {
      state.stalled = true;
      stream.controller.abort();
    }, idleMs);
  };
  try {
    arm();
    for await (const chunk of stream) {
      clearTimeout(timer);
      const delta = takeChunk(state, chunk);
      if (delta) yield delta;
      arm();
    }
    const rest = state.aborted ? undefined : heldAtEnd(state);
    if (rest) yield rest;
  } catch (err) {
    if (state.aborted) return;
    if (state.stalled) {
      const problem = streamEndProblem(state, idleMs) as string;
      // Named as a timeout for metrics and traces (errorTypeOf reads the cause's name).
      throw new ProviderError(problem, { cause: Object.assign(new Error(problem), { name: "TimeoutError" }) });
    }
    throw new ProviderError(`Model stream failed: ${describe(err)}`, { cause: err });
  } finally {
    clearTimeout(timer);
  }
}

/** zod → JSON Schema as Structured Outputs' strict mode wants it (every key required, closed objects). */
export function strictJsonSchema(schema: z.ZodType): Record<string, unknown> {
  const json = z.toJSONSchema(schema, { target: "draft-7", io: "output" }) as Record<string, unknown>;
  delete json.$schema;
  return json;
}

function describe(err: unknown): string {
  if (err instanceof OpenAI.APIError) {
    return err.status ? `provider answered ${err.status}${err.message ? `: ${err.message}` : ""}` : err.message;
  }
  return err instanceof Error ? err.message : String(err);
}
