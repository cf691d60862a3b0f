import OpenAI from "openai";
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
