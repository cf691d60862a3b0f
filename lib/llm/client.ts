import OpenAI from "openai";
import type { ChatCompletionChunk } from "openai/resources/chat/completions";
import type { Stream } from "openai/streaming";
import { z } from "zod";
import type { Config } from "../config";

/**
 * The model provider as the domain sees it. One implementation, over the `openai` SDK, so any
 * OpenAI-compatible server (vLLM, Ollama, a gateway, the tests' fake) serves it; the SDK brings
 * timeouts and retries with backoff on 429, 5xx and connection errors.
 */
export interface Llm {
  /** One Chat Completions call with Structured Outputs; the answer is parsed with `schema`. */
  structured<T extends z.ZodType>(request: StructuredRequest<T>): Promise<z.infer<T>>;
  /** A free-text Chat Completions call. */
  complete(request: { system: string; messages: ChatMessage[]; maxTokens?: number }): Promise<Completion>;
  /**
   * The same call, streamed. Resolves once the provider accepted the request (its headers
   * arrived; failures up to then are retried like `complete`'s and rejected as ProviderError).
   */
  stream(request: { system: string; messages: ChatMessage[]; maxTokens?: number }): Promise<CompletionStream>;
  /** One Embeddings call for the whole batch, vectors in input order. */
  embed(texts: string[]): Promise<number[][]>;
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

/** Raised for every provider failure, with a message fit for an episode's `error`. */
export class ProviderError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ProviderError";
  }
}

export interface LlmOptions {
  timeoutMs?: number;
  maxRetries?: number;
  fetch?: typeof fetch;
}

export function createLlm(config: Config, options: LlmOptions = {}): Llm {
  const { apiKey, baseUrl, llmModel, embeddingModel, embeddingDimensions } = config.openai;
  let client: OpenAI | undefined;
  const openai = () => {
    if (!apiKey) throw new ProviderError("OPENAI_API_KEY is not configured: no model provider is available");
    client ??= new OpenAI({
      apiKey,
      baseURL: baseUrl,
      timeout: options.timeoutMs ?? 60_000,
      maxRetries: options.maxRetries ?? 2,
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
    return client;
  };

  const call = async <R>(what: string, run: () => Promise<R>): Promise<R> => {
    try {
      return await run();
    } catch (err) {
      if (err instanceof ProviderError) throw err;
      throw new ProviderError(`${what} failed: ${describe(err)}`, { cause: err });
    }
  };

  return {
    structured: (request) =>
      call(`Model call (${request.name})`, async () => {
        const response = await openai().chat.completions.create({
          model: llmModel,
          messages: [
            { role: "system", content: request.system },
            { role: "user", content: request.user },
          ],
          response_format: {
            type: "json_schema",
            json_schema: { name: request.name, strict: true, schema: strictJsonSchema(request.schema) },
          },
        });
        const content = response.choices[0]?.message?.content;
        if (!content) throw new ProviderError(`Model call (${request.name}) returned no content`);
        let parsed: unknown;
        try {
          parsed = JSON.parse(content);
        } catch {
          throw new ProviderError(`Model call (${request.name}) returned invalid JSON`);
        }
        const result = request.schema.safeParse(parsed);
        if (!result.success) {
          throw new ProviderError(`Model call (${request.name}) returned JSON that does not match the schema`);
        }
        return result.data;
      }),

    complete: (request) =>
      call("Model call", async () => {
        const response = await openai().chat.completions.create({
          model: llmModel,
          messages: [{ role: "system", content: request.system }, ...request.messages],
          ...(request.maxTokens ? { max_tokens: request.maxTokens } : {}),
        });
        const text = response.choices[0]?.message?.content;
        if (!text) throw new ProviderError("Model call returned no content");
        return {
          text,
          model: response.model,
          tokens: {
            input: response.usage?.prompt_tokens,
            output: response.usage?.completion_tokens,
            total: response.usage?.total_tokens,
          },
        };
      }),

    stream: (request) =>
      call("Model call", async () => {
        const stream = await openai().chat.completions.create({
          model: llmModel,
          messages: [{ role: "system", content: request.system }, ...request.messages],
          stream: true,
          stream_options: { include_usage: true },
          ...(request.maxTokens ? { max_tokens: request.maxTokens } : {}),
        });
        return completionStream(stream, llmModel, options.timeoutMs ?? 60_000);
      }),

    embed: (texts) =>
      call("Embedding call", async () => {
        if (texts.length === 0) return [];
        const response = await openai().embeddings.create({
          model: embeddingModel,
          input: texts,
          dimensions: embeddingDimensions,
          encoding_format: "float",
        });
        const vectors = [...response.data].sort((a, b) => a.index - b.index).map((d) => d.embedding);
        if (vectors.length !== texts.length || vectors.some((v) => v.length !== embeddingDimensions)) {
          throw new ProviderError(
            `Embedding call returned ${vectors.length} vectors of size ${vectors[0]?.length} (expected ${texts.length} of ${embeddingDimensions})`,
          );
        }
        return vectors;
      }),
  };
}

/**
 * The SDK's timeout ends when the headers arrive, so a stream that stops sending would hang its
 * reader for good: here `idleMs` without a chunk from the provider fails it. Time the consumer
 * spends between reads (writing to a slow client) does not count.
 */
function completionStream(stream: Stream<ChatCompletionChunk>, requestedModel: string, idleMs: number) {
  const stallError = () => new ProviderError(`Model stream stalled: no data for ${idleMs} ms`);
  let text = "";
  let model = requestedModel;
  let usage: ChatCompletionChunk["usage"];
  let finished = false;
  let complete = false;
  let aborted = false;
  let stalled = false;
  let consumed = false;
  const result: CompletionStream = {
    async *[Symbol.asyncIterator]() {
      if (consumed) throw new Error("A completion stream can be read only once");
      consumed = true;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const arm = () => {
        timer = setTimeout(() => {
          stalled = true;
          stream.controller.abort();
        }, idleMs);
      };
      try {
        arm();
        for await (const chunk of stream) {
          clearTimeout(timer);
          if (chunk.model) model = chunk.model;
          if (chunk.usage) usage = chunk.usage;
          const choice = chunk.choices[0];
          if (choice?.finish_reason) finished = true;
          const delta = choice?.delta?.content;
          if (delta) {
            text += delta;
            yield delta;
          }
          arm();
        }
      } catch (err) {
        if (aborted) return;
        if (stalled) throw stallError();
        throw new ProviderError(`Model stream failed: ${describe(err)}`, { cause: err });
      } finally {
        clearTimeout(timer);
      }
      // An abort (ours or the stall timer's) ends the SDK's iteration quietly.
      if (aborted) return;
      if (stalled) throw stallError();
      if (!finished) throw new ProviderError("Model stream ended before the reply was complete");
      if (!text) throw new ProviderError("Model call returned no content");
      complete = true;
    },
    completion() {
      if (!complete) throw new ProviderError("Model stream has not completed");
      return {
        text,
        model,
        tokens: { input: usage?.prompt_tokens, output: usage?.completion_tokens, total: usage?.total_tokens },
      };
    },
    abort() {
      aborted = true;
      stream.controller.abort();
    },
  };
  return result;
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
