import { readFileSync } from "node:fs";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { createNodeService } from "../../functions/node";
import { parseConfig } from "../../lib/config";
import { createPgliteDatabase, pgliteClientOf } from "../../lib/db/pglite";
import type { Database } from "../../lib/db/types";
import { NO_PROVIDER_MESSAGE } from "../../lib/errors";
import { createLlm, EMBEDDING_PROBE_TEXT } from "../../lib/llm/client";
import { EmbeddingDimensionsError } from "../../lib/llm/embedding-check";
import { type Logger, silentLogger } from "../../lib/log";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { type FakeOpenAI, fakeEmbedding, startFakeOpenAI } from "../helpers/fake-openai";

/**
 * The Node.js host checks EMBEDDING_DIMENSIONS once at start, against the database (the template is
 * migrated for TEST_EMBEDDING_DIMENSIONS = 64) and against the embedding model (one probe call to
 * the fake provider), and refuses to start on a mismatch rather than failing at the first write.
 */
let fake: FakeOpenAI;
beforeAll(async () => {
  fake = await startFakeOpenAI();
});
afterAll(() => fake.close());
beforeEach(() => fake.reset());

const template = () => new Blob([readFileSync(inject("templatePath"))]);

interface Logged {
  level: string;
  message: string;
  fields?: Record<string, unknown>;
}

async function start(env: Record<string, string>, options: { database?: Database; provider?: boolean } = {}) {
  const logged: Logged[] = [];
  const log: Logger = {
    ...silentLogger,
    warn: (message, fields) => logged.push({ level: "warn", message, fields }),
    error: (message, fields) => logged.push({ level: "error", message, fields }),
  };
  const config = parseConfig({
    PGLITE_DIR: "memory://",
    ADMIN_PASSWORD: "admin-password-for-tests",
    ...(options.provider === false ? {} : { OPENAI_BASE_URL: fake.url }),
    ...env,
  });
  const database = options.database ?? (await createPgliteDatabase({ loadDataDir: template() }));
  const service = createNodeService({
    config,
    database,
    log,
    llm: createLlm(config, { maxRetries: 0, timeoutMs: 2000 }),
    doorbell: { ring: async () => {} },
    sweepIntervalMs: false,
  });
  return { service, logged, database };
}

/** A copy of the template holding one fact whose vector has `dims` numbers. */
async function databaseWithVector(dims: number): Promise<Database> {
  const database = await createPgliteDatabase({ loadDataDir: template() });
  await database.db.execute(sql`INSERT INTO projects (id, name) VALUES ('prj_dims', 'dims')`);
  await database.db.execute(sql`
    INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at, embedding)
    VALUES ('fct_dims', 'prj_dims', 'ds', 'user', 'likes', 'tea', 0.9, 'I like tea', now(),
            ${`[${fakeEmbedding("user likes tea", dims)}]`}::vector)`);
  return database;
}

describe("EMBEDDING_DIMENSIONS at start", () => {
  it("matching database and model: starts, after one probe embedding call with the configured size", async () => {
    const { service, logged } = await start({ EMBEDDING_DIMENSIONS: String(TEST_EMBEDDING_DIMENSIONS) });
    const svc = await service;
    try {
      expect(fake.embeddingCalls()).toEqual([
        expect.objectContaining({ input: [EMBEDDING_PROBE_TEXT], dimensions: TEST_EMBEDDING_DIMENSIONS }),
      ]);
      expect(logged).toEqual([]);
    } finally {
      await svc.close();
    }
  });

  it("a database migrated for another size (no vectors yet): refuses to start, naming both sizes and the model", async () => {
    const { service } = await start({ EMBEDDING_DIMENSIONS: "32", EMBEDDING_MODEL: "nomic-embed-text" });
    const err = await service.catch((e) => e);
    expect(err).toBeInstanceOf(EmbeddingDimensionsError);
    expect(err.message).toBe(
      'EMBEDDING_DIMENSIONS is 32 (embedding model "nomic-embed-text") but the database was migrated for vectors ' +
        "of size 64 (indexes entities_embedding_hnsw_64, episodes_embedding_hnsw_64, facts_embedding_hnsw_64) " +
        "and holds no vectors yet. Set EMBEDDING_DIMENSIONS=64, or, to change the size of this empty database, " +
        "drop those indexes first.",
    );
    // Refused before the provider was asked and before any index for 32 was made.
    expect(fake.requests).toEqual([]);
  });

  it("a database holding vectors of another size: refuses to start, even with an index for the new size", async () => {
    const database = await databaseWithVector(64);
    await database.db.execute(
      sql.raw(
        "CREATE INDEX facts_embedding_hnsw_32 ON facts USING hnsw ((embedding::vector(32)) vector_cosine_ops) WHERE vector_dims(embedding) = 32",
      ),
    );
    const dump = await pgliteClientOf(database).dumpDataDir("none");
    await database.close();
    const { service } = await start(
      { EMBEDDING_DIMENSIONS: "32" },
      { database: await createPgliteDatabase({ loadDataDir: dump }) },
    );
    await expect(service).rejects.toThrow(
      'EMBEDDING_DIMENSIONS is 32 (embedding model "text-embedding-3-small") but the database holds vectors of size 64 (table facts).',
    );
  });

  it("the same database with the size it holds: starts", async () => {
    const { service } = await start(
      { EMBEDDING_DIMENSIONS: String(TEST_EMBEDDING_DIMENSIONS) },
      { database: await databaseWithVector(TEST_EMBEDDING_DIMENSIONS) },
    );
    await (await service).close();
  });

  it("a model that returns another size (it ignores `dimensions`): refuses to start", async () => {
    fake.nativeEmbeddingSize = 768;
    const { service } = await start({
      EMBEDDING_DIMENSIONS: String(TEST_EMBEDDING_DIMENSIONS),
      EMBEDDING_MODEL: "nomic-embed-text",
    });
    const err = await service.catch((e) => e);
    expect(err).toBeInstanceOf(EmbeddingDimensionsError);
    expect(err.message).toMatch(
      /^EMBEDDING_DIMENSIONS is 64 but the embedding model "nomic-embed-text" returns vectors of size 768 \(asked for 64\)\. Set EMBEDDING_DIMENSIONS=768/,
    );
  });

  it("a provider that cannot be reached at start: one warning, and the service starts", async () => {
    fake.fail({ status: 503, times: Number.POSITIVE_INFINITY, endpoint: "embeddings" });
    const { service, logged } = await start({ EMBEDDING_DIMENSIONS: String(TEST_EMBEDDING_DIMENSIONS) });
    const svc = await service;
    try {
      expect(logged).toEqual([
        {
          level: "warn",
          message: "could not check the embedding model's vector size at start; going on",
          fields: {
            model: "text-embedding-3-small",
            embeddingDimensions: TEST_EMBEDDING_DIMENSIONS,
            error: expect.stringMatching(/^Embedding call failed: provider answered 503/),
          },
        },
      ]);
      expect((await svc.app.request("/health")).status).toBe(200);
    } finally {
      await svc.close();
    }
  });

  it("no provider configured: one warning naming OPENAI_API_KEY and OPENAI_BASE_URL, the database still checked", async () => {
    const { service, logged } = await start(
      { EMBEDDING_DIMENSIONS: String(TEST_EMBEDDING_DIMENSIONS) },
      { provider: false },
    );
    const svc = await service;
    try {
      expect(logged).toEqual([
        {
          level: "warn",
          message: `${NO_PROVIDER_MESSAGE}. Until then chat, compaction and episode search answer 500, episodes and facts fail, and recall searches by keyword.`,
        },
      ]);
      expect(logged[0].message).toMatch(/OPENAI_API_KEY.*OPENAI_BASE_URL/);
      expect(fake.requests).toEqual([]);
    } finally {
      await svc.close();
    }
    const mismatched = await start({ EMBEDDING_DIMENSIONS: "32" }, { provider: false });
    await expect(mismatched.service).rejects.toThrow(/^EMBEDDING_DIMENSIONS is 32 .* migrated for vectors of size 64/);
  });
});
