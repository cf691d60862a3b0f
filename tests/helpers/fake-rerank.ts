import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { listen } from "../../functions/listen";

/**
 * A local rerank server for tests: `POST /rerank` (also `/v1/rerank` and `/v2/rerank`) answered
 * as vLLM does (`{id, model, usage, results: [{index, document: {text}, relevance_score}]}`, best
 * first, `top_n` honoured), over real HTTP so the service's own client, its timeout and its
 * parsing run. Documents are scored by the words they share with the query unless a `score`
 * function is given. Failures are switchable: an error status (with vLLM's error body), a hang
 * past the client's timeout, a malformed body; `answer` replaces the body outright (partial or
 * odd answers). With `apiKey` it wants `Authorization: Bearer <key>`, as `vllm serve --api-key`.
 */
export interface RerankBody {
  model?: string;
  query: string;
  documents: string[];
  top_n?: number;
}

export interface RerankFailure {
  /** How many requests fail before the server recovers (Infinity: until cleared). */
  times: number;
  /** Answer with this status and an error body. */
  status?: number;
  /** Keep the connection open without answering until the client gives up. */
  hang?: boolean;
  /** Answer 200 with a body that is not JSON. */
  malformed?: boolean;
}

export interface FakeRerank {
  /** The base URL to set as RERANK_BASE_URL (ends in /v1, like vLLM's). */
  url: string;
  requests: { path: string; headers: IncomingHttpHeaders; body: RerankBody }[];
  /** A document's relevance to the query; default: the share of the query's words it contains. */
  score: (query: string, document: string) => number;
  /** Name of the score field: vLLM, Jina and Cohere write `relevance_score`; some servers `score`. */
  scoreField: "relevance_score" | "score";
  /** When set, the body of every 200 answer (the request's scores are not computed). */
  answer: ((body: RerankBody) => unknown) | undefined;
  latencyMs: number;
  /** Hung requests whose client closed the connection (gave up on its timeout). */
  abandoned: number;
  fail(failure: RerankFailure): void;
  reset(): void;
  close(): Promise<void>;
}

const words = (text: string) => new Set(text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []);

/** The share of the query's words found in the document (0-1). */
export function wordOverlap(query: string, document: string): number {
  const wanted = words(query);
  if (wanted.size === 0) return 0;
  const have = words(document);
  let shared = 0;
  for (const word of wanted) if (have.has(word)) shared++;
  return shared / wanted.size;
}

export async function startFakeRerank(options: { apiKey?: string } = {}): Promise<FakeRerank> {
  let failures: RerankFailure[] = [];
  const hung = new Set<() => void>();

  const fake: FakeRerank = {
    url: "",
    requests: [],
    score: wordOverlap,
    scoreField: "relevance_score",
    answer: undefined,
    latencyMs: 0,
    abandoned: 0,
    fail: (failure) => failures.push({ ...failure }),
    reset() {
      fake.requests.length = 0;
      fake.score = wordOverlap;
      fake.scoreField = "relevance_score";
      fake.answer = undefined;
      fake.latencyMs = 0;
      fake.abandoned = 0;
      failures = [];
    },
    close: () =>
      new Promise((resolve) => {
        for (const release of hung) release();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };

  const server: Server = createServer(async (req, res) => {
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(typeof body === "string" ? body : JSON.stringify(body));
    };
    // vLLM's error body: {object: "error", message, type, code}.
    const error = (status: number, message: string) =>
      send(status, { object: "error", message, type: status === 429 ? "TooManyRequests" : "Error", code: status });
    const path = req.url ?? "";
    if (req.method !== "POST" || !/^(\/v[12])?\/rerank$/.test(path)) return error(404, `Unknown route ${path}`);
    if (options.apiKey && req.headers.authorization !== `Bearer ${options.apiKey}`) {
      return send(401, { error: "Unauthorized" });
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    let body: RerankBody;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      return error(400, "Request body is not JSON");
    }
    fake.requests.push({ path, headers: req.headers, body });
    if (fake.latencyMs > 0) await new Promise((r) => setTimeout(r, fake.latencyMs));

    const failure = failures.find((f) => f.times > 0);
    if (failure) {
      failure.times--;
      if (failure.hang) {
        await new Promise<void>((resolve) => {
          hung.add(resolve);
          res.on("close", () => {
            fake.abandoned++;
            resolve();
          });
        });
        return;
      }
      if (failure.malformed) return send(200, '{"results": [{"index": 0, "relevance_sc');
      return error(failure.status ?? 500, `Simulated ${failure.status ?? 500}`);
    }
    if (!Array.isArray(body.documents) || typeof body.query !== "string") {
      return error(400, "query (string) and documents (array) are required");
    }
    if (fake.answer) return send(200, fake.answer(body));

    const results = body.documents
      .map((text, index) => ({ index, document: { text }, [fake.scoreField]: fake.score(body.query, text) }))
      .sort((a, b) => (b[fake.scoreField] as number) - (a[fake.scoreField] as number))
      .slice(0, body.top_n ?? body.documents.length);
    const tokens = body.documents.join(" ").split(/\s+/).length;
    send(200, {
      id: `rerank-${fake.requests.length}`,
      model: body.model ?? "fake-reranker",
      usage: { total_tokens: tokens },
      results,
    });
  });

  fake.url = `http://127.0.0.1:${await listen(server)}/v1`;
  return fake;
}
