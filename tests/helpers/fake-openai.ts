import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { listen } from "../../functions/listen";

/**
 * A local OpenAI-compatible server for tests and benchmarks: Chat Completions (plain and
 * Structured Outputs) and Embeddings over real HTTP, so the real `openai` client, its retries and
 * its parsing run. Embeddings are deterministic (hashed bag of words, normalised), so texts that
 * share words are close. Failures and latency are switchable and behave like the provider's
 * (JSON error bodies, `retry-after` on 429, a connection that hangs past the client's timeout).
 * Chat requests with `stream: true` are answered as server-sent `chat.completion.chunk` events,
 * one per word, like the real API. It can also act like a self-hosted server (vLLM, Ollama,
 * llama.cpp): without JSON-schema output (`jsonSchema: "rejected"`), with a model that answers
 * broken JSON (`invalidJsonAnswers`), or with an embedding model of a fixed size that ignores
 * `dimensions` (`nativeEmbeddingSize`). Every answer reports `usage` as the real API does, with
 * token counts estimated like a BPE tokenizer's for English (about 4 characters a token, plus the
 * chat format's few tokens per message: {@link fakeTokens}); `usage: "none"` acts like a server
 * that reports none (some self-hosted servers, gateways). Each request records what it reported.
 */
export interface ChatRequest {
  model: string;
  messages: { role: string; content: string }[];
  response_format?: { type: string; json_schema?: { name: string; strict?: boolean; schema: unknown } };
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  max_tokens?: number;
}

export type ChatHandler = (request: ChatRequest) => unknown | Promise<unknown>;

export interface Failure {
  status: number;
  /** How many requests fail before the server recovers (Infinity: until cleared). */
  times: number;
  /** Which endpoint fails; both when absent. */
  endpoint?: "chat" | "embeddings";
  /** Hang instead of answering (the client times out). */
  hang?: boolean;
  /**
   * Answer 200 with a body that is not the shape asked for (`status` is not used): "no-choices" a
   * completion without `choices` (embeddings: without `data`), "text" a body that is not JSON.
   */
  malformed?: "no-choices" | "text";
  /**
   * Only for streamed chat requests (others ignore it and do not use up `times`): answer 200,
   * send the first half of the chunks, then destroy the socket (`status` is not used).
   */
  midStream?: boolean;
}

/** The `usage` object of an answer, as the fake reported it. */
export interface ReportedUsage {
  prompt_tokens: number;
  completion_tokens?: number;
  total_tokens: number;
}

/** About 4 characters a token, as BPE tokenizers count English text (0 for no text). */
export const fakeTokens = (text: string) => Math.ceil(text.length / 4);

/** A chat request's prompt tokens: each message's text and its 4 format tokens, 3 to prime the reply. */
export const fakePromptTokens = (messages: { content: string }[]) =>
  messages.reduce((n, m) => n + fakeTokens(m.content ?? "") + 4, 3);

/** The usage the fake reported for the one structured call of `schemaName` it answered. */
export function reportedUsage(fake: Pick<FakeOpenAI, "requests">, schemaName: string): ReportedUsage {
  const calls = fake.requests.filter(
    (r) =>
      (r.body.response_format as { json_schema?: { name?: string } } | undefined)?.json_schema?.name === schemaName,
  );
  if (calls.length !== 1 || !calls[0].usage) {
    throw new Error(`expected one ${schemaName} call with usage, got ${calls.length}`);
  }
  return calls[0].usage;
}

export interface FakeOpenAI {
  url: string;
  /**
   * Requests received, in order, with the Authorization header they carried and the usage the
   * answer reported (null: it failed, or the fake reports no usage).
   */
  requests: {
    endpoint: "chat" | "embeddings";
    body: Record<string, unknown>;
    authorization?: string;
    usage: ReportedUsage | null;
  }[];
  /**
   * Chat requests received; with a name, only the structured calls for that schema (JSON schema,
   * or JSON mode naming it in the system prompt).
   */
  chatCalls(schemaName?: string): ChatRequest[];
  embeddingCalls(): { input: string[]; dimensions?: number }[];
  /** Answer Structured-Outputs calls for a schema name. The value is returned as JSON content. */
  onStructured(name: string, handler: ChatHandler): void;
  /** Answer plain (free-text) completions. */
  onText(handler: (request: ChatRequest) => string): void;
  fail(failure: Failure): void;
  /** Drops the connections of the requests hanging now (a `hang` failure): their calls fail at once. */
  dropHung(): void;
  clearFailures(): void;
  latencyMs: number;
  /** Added to `latencyMs` per endpoint (a realistic profile: embeddings 150 ms, chat 800 ms). */
  endpointLatencyMs: { chat: number; embeddings: number };
  /** Pause between the chunks of a streamed reply. */
  streamChunkDelayMs: number;
  /** Streamed replies whose connection the client closed before the last chunk was sent. */
  streamsClosedEarly: number;
  /** Requests being answered now, and the most there were at once since the last reset. */
  inFlight: number;
  peakInFlight: number;
  /**
   * "rejected": like a server without JSON-schema output, `response_format: {type: "json_schema"}`
   * is answered 400 (JSON mode, `{type: "json_object"}`, still works). Default "supported".
   */
  jsonSchema: "supported" | "rejected";
  /** The next this many structured answers are broken JSON (the model's fault, sent with a 200). */
  invalidJsonAnswers: number;
  /**
   * Like a model with one output size that ignores `dimensions` (nomic-embed-text: 768): every
   * vector has this size. Default: the requested `dimensions`.
   */
  nativeEmbeddingSize: number | undefined;
  /** Like vLLM serving a model that is not Matryoshka: any `dimensions` is answered 400. */
  rejectDimensions: boolean;
  /**
   * Like a model with a short input window (512 tokens for many that vLLM or TEI serve): a request
   * with an input of more tokens than this (fakeTokens) is refused whole with vLLM's 400. Default:
   * no limit.
   */
  maxInputTokens: number | undefined;
  /**
   * Like a chat model's context window: a chat request whose messages come to more tokens than
   * this (fakePromptTokens) is refused with OpenAI's 400 `context_length_exceeded`. Default: none.
   */
  maxPromptTokens: number | undefined;
  /** "reported" (default): every answer carries `usage`; "none": like a server that reports none. */
  usage: "reported" | "none";
  reset(): void;
  close(): Promise<void>;
}

export function fakeEmbedding(text: string, dimensions: number): number[] {
  const vector = new Array<number>(dimensions).fill(0);
  const words = text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  for (const word of words) {
    const digest = createHash("sha256").update(word).digest();
    for (let k = 0; k < 4; k++) {
      const index = digest.readUInt32LE(k * 4) % dimensions;
      vector[index] += digest[16 + k] & 1 ? 1 : -1;
    }
  }
  const norm = Math.hypot(...vector) || 1;
  if (words.length === 0) vector[0] = 1;
  return vector.map((v) => v / norm);
}

/** A unit vector: `base` turned towards a private direction (from `seed`) so that cosine = `similarity`. */
export function near(base: number[], similarity: number, seed: string): number[] {
  const other = fakeEmbedding(`orthogonal ${seed}`, base.length);
  const dot = other.reduce((s, v, i) => s + v * base[i], 0);
  const ortho = other.map((v, i) => v - dot * base[i]);
  const norm = Math.hypot(...ortho);
  const sine = Math.sqrt(1 - similarity * similarity);
  return base.map((v, i) => similarity * v + (sine * ortho[i]) / norm);
}

/**
 * The schema a structured call is for: `json_schema.name`, or in JSON mode the name the system
 * prompt gives its schema (`JSON Schema named "..."`, as lib/llm/client.ts writes it).
 */
function structuredName(request: ChatRequest): string | undefined {
  if (request.response_format?.type === "json_schema") return request.response_format.json_schema?.name;
  if (request.response_format?.type !== "json_object") return undefined;
  const system = request.messages.find((m) => m.role === "system")?.content ?? "";
  return /JSON Schema named "([^"]+)"/.exec(system)?.[1];
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
}

/** Where the server listens: an ephemeral port on 127.0.0.1 unless given (the demo provider's fixed port). */
export interface FakeOpenAIOptions {
  port?: number;
  host?: string;
  /**
   * Embeddings from a real model instead of the hashed bag of words (the retrieval-quality
   * benchmark's offline sentence model), so rankings measured through the service mean something.
   */
  embed?: (texts: string[], dimensions: number) => Promise<number[][]>;
}

export async function startFakeOpenAI(options: FakeOpenAIOptions = {}): Promise<FakeOpenAI> {
  const structured = new Map<string, ChatHandler>();
  let text: (request: ChatRequest) => string = (r) => `Reply to: ${r.messages.at(-1)?.content ?? ""}`;
  let failures: Failure[] = [];
  const hung = new Set<() => void>();

  const fake: FakeOpenAI = {
    url: "",
    requests: [],
    chatCalls: (schemaName) =>
      fake.requests
        .filter((r) => r.endpoint === "chat")
        .map((r) => r.body as unknown as ChatRequest)
        .filter((r) => schemaName === undefined || structuredName(r) === schemaName),
    embeddingCalls: () =>
      fake.requests
        .filter((r) => r.endpoint === "embeddings")
        .map((r) => r.body as unknown as { input: string[]; dimensions?: number }),
    onStructured: (name, handler) => structured.set(name, handler),
    onText: (handler) => {
      text = handler;
    },
    fail: (failure) => failures.push({ ...failure }),
    clearFailures: () => {
      failures = [];
    },
    latencyMs: 0,
    endpointLatencyMs: { chat: 0, embeddings: 0 },
    streamChunkDelayMs: 0,
    streamsClosedEarly: 0,
    inFlight: 0,
    peakInFlight: 0,
    jsonSchema: "supported",
    invalidJsonAnswers: 0,
    nativeEmbeddingSize: undefined,
    rejectDimensions: false,
    maxInputTokens: undefined,
    maxPromptTokens: undefined,
    usage: "reported",
    reset() {
      fake.requests.length = 0;
      structured.clear();
      failures = [];
      fake.latencyMs = 0;
      fake.endpointLatencyMs = { chat: 0, embeddings: 0 };
      fake.streamChunkDelayMs = 0;
      fake.streamsClosedEarly = 0;
      fake.peakInFlight = fake.inFlight;
      fake.jsonSchema = "supported";
      fake.invalidJsonAnswers = 0;
      fake.nativeEmbeddingSize = undefined;
      fake.rejectDimensions = false;
      fake.maxInputTokens = undefined;
      fake.maxPromptTokens = undefined;
      fake.usage = "reported";
    },
    dropHung() {
      for (const release of hung) release();
      hung.clear();
    },
    close: () =>
      new Promise((resolve) => {
        for (const release of hung) release();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };

  const server: Server = createServer(async (req, res) => {
    fake.peakInFlight = Math.max(fake.peakInFlight, ++fake.inFlight);
    res.on("close", () => fake.inFlight--);
    const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "content-type": "application/json", ...headers });
      res.end(JSON.stringify(body));
    };
    /**
     * The reply as the real API streams it: a first chunk with the role, one chunk per word, a
     * chunk with `finish_reason`, the usage chunk (empty `choices`) when asked for, then `[DONE]`.
     */
    const streamChat = async (
      request: ChatRequest,
      content: string,
      n: number,
      dieMidway: boolean,
      usage: ReportedUsage | null,
    ) => {
      const base = { id: `chatcmpl-${n}`, object: "chat.completion.chunk", created: Math.floor(Date.now() / 1000) };
      const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
        `data: ${JSON.stringify({ ...base, model: request.model, choices, ...extra })}\n\n`;
      const words = content.match(/\s*\S+\s*/g) ?? [content];
      const events = [
        chunk([{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null, logprobs: null }]),
        ...words.map((word) => chunk([{ index: 0, delta: { content: word }, finish_reason: null, logprobs: null }])),
        chunk([{ index: 0, delta: {}, finish_reason: "stop", logprobs: null }]),
        ...(request.stream_options?.include_usage && usage ? [chunk([], { usage })] : []),
        "data: [DONE]\n\n",
      ];
      // Dying midway: the role chunk and half of the words, then the socket goes.
      const sent = dieMidway ? 1 + Math.floor(words.length / 2) : events.length;
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      let closed = false;
      res.on("close", () => {
        closed = true;
      });
      for (const event of events.slice(0, sent)) {
        if (closed) break;
        res.write(event);
        if (fake.streamChunkDelayMs > 0) await new Promise((r) => setTimeout(r, fake.streamChunkDelayMs));
      }
      if (dieMidway) {
        // Let the chunks reach the client before the connection breaks.
        await new Promise((r) => setTimeout(r, 20));
        res.socket?.destroy();
      } else if (closed) {
        fake.streamsClosedEarly++;
      } else {
        res.end();
      }
    };
    try {
      const endpoint = req.url?.endsWith("/chat/completions")
        ? "chat"
        : req.url?.endsWith("/embeddings")
          ? "embeddings"
          : undefined;
      if (req.method !== "POST" || !endpoint) {
        return send(404, {
          error: { message: `Unknown route ${req.method} ${req.url}`, type: "invalid_request_error" },
        });
      }
      const body = await readJson(req);
      const logged: FakeOpenAI["requests"][number] = {
        endpoint,
        body,
        authorization: req.headers.authorization,
        usage: null,
      };
      fake.requests.push(logged);
      /** The usage this answer reports (recorded with the request), or none. */
      const report = (usage: ReportedUsage) => {
        if (fake.usage === "none") return {};
        logged.usage = usage;
        return { usage };
      };
      const delay = fake.latencyMs + fake.endpointLatencyMs[endpoint];
      if (delay > 0) await new Promise((r) => setTimeout(r, delay));

      const streamed = endpoint === "chat" && body.stream === true;
      const failure = failures.find(
        (f) => f.times > 0 && (!f.endpoint || f.endpoint === endpoint) && (!f.midStream || streamed),
      );
      if (failure && !failure.midStream) {
        failure.times--;
        if (failure.hang) {
          await new Promise<void>((resolve) => {
            hung.add(resolve);
            req.on("close", () => resolve());
          });
          // Released (dropHung, close): the connection goes, as a provider's crash would take it.
          res.socket?.destroy();
          return;
        }
        if (failure.malformed === "text") {
          res.writeHead(200, { "content-type": "text/plain" });
          return res.end("upstream gateway says hello");
        }
        if (failure.malformed === "no-choices") {
          return send(200, {
            id: "broken",
            object: endpoint === "chat" ? "chat.completion" : "list",
            model: body.model,
          });
        }
        const type = failure.status === 429 ? "rate_limit_exceeded" : "server_error";
        return send(
          failure.status,
          { error: { message: `Simulated ${failure.status}`, type, code: type } },
          failure.status === 429 ? { "retry-after-ms": "10" } : {},
        );
      }

      if (endpoint === "embeddings") {
        if (fake.rejectDimensions && body.dimensions !== undefined) {
          return send(400, {
            object: "error",
            message: `Model "${body.model}" does not support matryoshka representation, changing output dimensions will lead to poor results.`,
            type: "BadRequestError",
            param: null,
            code: 400,
          });
        }
        const input = (Array.isArray(body.input) ? body.input : [body.input]) as string[];
        const longest = Math.max(0, ...input.map(fakeTokens));
        if (fake.maxInputTokens !== undefined && longest > fake.maxInputTokens) {
          return send(400, {
            object: "error",
            message: `This model's maximum context length is ${fake.maxInputTokens} tokens. However, you requested ${longest} tokens in the input for embedding generation. Please reduce the length of the input.`,
            type: "BadRequestError",
            param: null,
            code: 400,
          });
        }
        const dimensions = fake.nativeEmbeddingSize ?? Number(body.dimensions ?? 1536);
        const vectors = options.embed
          ? await options.embed(input, dimensions)
          : input.map((t) => fakeEmbedding(t, dimensions));
        return send(200, {
          object: "list",
          model: body.model,
          data: vectors.map((embedding, index) => ({ object: "embedding", index, embedding })),
          ...report({
            prompt_tokens: input.reduce((n, t) => n + fakeTokens(t), 0),
            total_tokens: input.reduce((n, t) => n + fakeTokens(t), 0),
          }),
        });
      }

      const request = body as unknown as ChatRequest;
      const promptTokens = fakePromptTokens(request.messages);
      if (fake.maxPromptTokens !== undefined && promptTokens > fake.maxPromptTokens) {
        return send(400, {
          error: {
            message: `This model's maximum context length is ${fake.maxPromptTokens} tokens. However, your messages resulted in ${promptTokens} tokens. Please reduce the length of the messages.`,
            type: "invalid_request_error",
            param: "messages",
            code: "context_length_exceeded",
          },
        });
      }
      let content: string;
      if (request.response_format?.type === "json_schema" && fake.jsonSchema === "rejected") {
        // As vLLM, llama.cpp server and gateways without Structured Outputs answer.
        return send(400, {
          error: {
            message: "response_format type 'json_schema' is not supported",
            type: "invalid_request_error",
            param: "response_format",
            code: null,
          },
        });
      }
      const schemaName = structuredName(request);
      if (schemaName) {
        const handler = structured.get(schemaName);
        if (!handler) {
          return send(400, {
            error: { message: `No fake answer scripted for schema ${schemaName}`, type: "invalid_request_error" },
          });
        }
        content = JSON.stringify(await handler(request));
        if (fake.invalidJsonAnswers > 0) {
          fake.invalidJsonAnswers--;
          content = `Sure! Here is the JSON: ${content.slice(0, -1)}`;
        }
      } else {
        content = text(request);
      }
      const chatUsage = {
        prompt_tokens: promptTokens,
        completion_tokens: fakeTokens(content),
        total_tokens: promptTokens + fakeTokens(content),
      };
      if (streamed) {
        if (failure) failure.times--;
        // A stream that dies midway never sends its usage chunk.
        const reported = failure || !request.stream_options?.include_usage ? {} : report(chatUsage);
        const usage = "usage" in reported ? (reported.usage ?? null) : null;
        return streamChat(request, content, fake.requests.length, failure !== undefined, usage);
      }
      return send(200, {
        id: `chatcmpl-${fake.requests.length}`,
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model: request.model,
        choices: [
          { index: 0, message: { role: "assistant", content, refusal: null }, finish_reason: "stop", logprobs: null },
        ],
        ...report(chatUsage),
      });
    } catch (err) {
      send(500, { error: { message: (err as Error).message, type: "server_error" } });
    }
  });

  const host = options.host ?? "127.0.0.1";
  const port = await listen(server, options.port, host);
  fake.url = `http://${host}:${port}/v1`;
  return fake;
}
