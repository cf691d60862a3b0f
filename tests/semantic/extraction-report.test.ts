import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { runDueJobs } from "../../lib/jobs/runner";
import { createLogger } from "../../lib/log";
import type { ExtractionReport } from "../../lib/semantic/report";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import type { Tenant } from "../helpers/episodic-fixtures";
import { fakeEmbedding } from "../helpers/fake-openai";
import { fact, factText, judge, useSemanticService } from "../helpers/semantic-fixtures";
import { adminSession } from "../helpers/service";

/**
 * What extraction proposed, kept and dropped by reason, on the real job path: the facts stored
 * (every way of naming the user stored as "user"), the episode's `extractionReport` through
 * /v1 (one and list) and the dashboard, and the one info line per extracted episode.
 */
const lines: Record<string, unknown>[] = [];
const log = createLogger({ level: "info", sink: (_level, line) => lines.push(JSON.parse(line)) });
const S = useSemanticService({ log });
const { h, tenant, extract, facts, setSemantic } = S;

const report = (
  proposed: number,
  kept: number,
  dropped: Partial<ExtractionReport["dropped"]> = {},
  invalidated = 0,
): ExtractionReport => ({
  proposed,
  kept,
  dropped: { notAboutUser: 0, quoteNotFound: 0, emptyPart: 0, duplicate: 0, lowConfidence: 0, ...dropped },
  invalidated,
});

async function episodeReport(t: Tenant, episodeId: string) {
  return (await t.episode(episodeId)).extractionReport;
}

const extractedLines = (episodeId: string) =>
  lines.filter((l) => l.message === "facts extracted" && l.episodeId === episodeId);

describe("extraction report", () => {
  it("stores I, me, The user and the user's name as user, and counts every drop by reason", async () => {
    const t = await tenant();
    const { episodeId } = await extract(
      t,
      [
        "Hi, my name is Ana Lima. I live in Lisbon.",
        "Welcome! Lisbon is lovely.",
        "I work at Acme Corp and I love jazz.",
        "Noted.",
        "I have a cat named Tom.",
        "Cute!",
      ],
      {
        facts: [
          fact("lives_in", "Lisbon", "I live in Lisbon", { subject: "I" }),
          fact("works_at", "Acme Corp", "I work at Acme Corp", { subject: "The user" }),
          fact("loves", "jazz", "I love jazz", { subject: "me" }),
          fact("has_pet", "Tom", "I have a cat named Tom", { subject: "Ana" }),
          // The cat is not the user, even quoted from the user.
          fact("is_a", "cat", "I have a cat named Tom", { subject: "Tom" }),
          // A made-up quote, and the assistant's words.
          fact("loves", "opera", "I adore opera"),
          fact("likes", "Lisbon", "Lisbon is lovely"),
          fact("likes", "", "I love jazz"),
          fact("lives_in", "lisbon", "I live in Lisbon", { subject: "myself" }),
        ],
        entities: [],
      },
    );

    expect((await facts(t)).map((f) => `${f.subject} ${f.predicate} ${f.object}`).sort()).toEqual([
      "user has_pet Tom",
      "user lives_in Lisbon",
      "user loves jazz",
      "user works_at Acme Corp",
    ]);
    // The stored fact's embedding is of its text with subject "user".
    expect(h.fake.embeddingCalls().at(-1)?.input).toContain(factText("has_pet", "Tom"));

    const expected = report(9, 4, { notAboutUser: 1, quoteNotFound: 2, emptyPart: 1, duplicate: 1 });
    expect(await episodeReport(t, episodeId)).toEqual(expected);
    const listed = await t.get("/v1/memory/episodic/datasets/ds/episodes");
    expect(listed.status).toBe(200);
    const { episodes } = (await listed.json()) as { episodes: { episodeId: string; extractionReport: unknown }[] };
    expect(episodes.find((e) => e.episodeId === episodeId)?.extractionReport).toEqual(expected);

    // One info line for the episode, with the counts.
    expect(extractedLines(episodeId)).toEqual([
      expect.objectContaining({
        level: "info",
        message: "facts extracted",
        episodeId,
        proposed: 9,
        kept: 4,
        notAboutUser: 1,
        quoteNotFound: 2,
        emptyPart: 1,
        duplicate: 1,
        lowConfidence: 0,
        invalidated: 0,
        entities: 0,
      }),
    ]);
  });

  it("counts a duplicate of a live fact and the live facts a contradiction ends; the dashboard shows the report", async () => {
    const t = await tenant();
    await extract(t, ["I live in Paris", "ok"], {
      facts: [fact("lives_in", "Paris", "I live in Paris")],
      entities: [],
    });
    await setSemantic(t, { contradictionBandMin: 0.1 });
    h.fake.onStructured(
      "contradiction_judgement",
      judge((old, young) => old === "user lives_in Paris" && young === "user moved_to Lisbon"),
    );
    const { episodeId } = await extract(t, ["I moved to Lisbon. Yes, I live in Paris no more.", "ok"], {
      facts: [
        fact("moved_to", "Lisbon", "I moved to Lisbon"),
        // Word for word the live fact: a duplicate of it (similarity 1).
        fact("lives_in", "Paris", "I live in Paris"),
      ],
      entities: [],
    });
    const expected = report(2, 1, { duplicate: 1 }, 1);
    expect(await episodeReport(t, episodeId)).toEqual(expected);
    expect(
      (await facts(t)).map((f) => `${f.predicate} ${f.object} ${f.invalidAt === null ? "live" : "ended"}`).sort(),
    ).toEqual(["lives_in Paris ended", "moved_to Lisbon live"]);
    expect(extractedLines(episodeId)).toEqual([expect.objectContaining({ kept: 1, duplicate: 1, invalidated: 1 })]);

    const session = await adminSession(h.svc);
    const res = await h.svc.request(`/dashboard/browse/episodes?projectId=${t.projectId}`, { token: session });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { episodes: { episodeId: string; extractionReport: unknown }[] };
    expect(body.episodes.find((e) => e.episodeId === episodeId)?.extractionReport).toEqual(expected);
  });

  it("a fact another extraction wrote meanwhile is dropped at write time and counted a duplicate", async () => {
    const t = await tenant();
    await extract(t, ["I live in Paris", "ok"], {
      facts: [fact("lives_in", "Paris", "I live in Paris")],
      entities: [],
    });
    await setSemantic(t, { contradictionBandMin: 0.1 });
    // While this extraction waits for the judge, the same fact lands (as a concurrent
    // extraction of the dataset would write it).
    h.fake.onStructured("contradiction_judgement", async (request) => {
      const vector = `[${fakeEmbedding(factText("moved_to", "Lisbon"), TEST_EMBEDDING_DIMENSIONS).join(",")}]`;
      await h.svc.deps.db.execute(sql`
        INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at, embedding, created_at)
        VALUES ('fct_meanwhile', ${t.projectId}, 'ds', 'user', 'moved_to', 'Lisbon', 0.9, 'I moved to Lisbon',
          now(), ${vector}::vector, now())`);
      return judge(() => true)(request);
    });
    const { episodeId } = await extract(t, ["I moved to Lisbon", "ok"], {
      facts: [fact("moved_to", "Lisbon", "I moved to Lisbon")],
      entities: [],
    });
    expect(await episodeReport(t, episodeId)).toEqual(report(1, 0, { duplicate: 1 }, 1));
    expect((await facts(t)).filter((f) => f.predicate === "moved_to").map((f) => f.id)).toEqual(["fct_meanwhile"]);
    expect(extractedLines(episodeId)).toEqual([expect.objectContaining({ proposed: 1, kept: 0, duplicate: 1 })]);
  });

  it("takes the user's name from a name fact stored by an earlier episode", async () => {
    const t = await tenant();
    await extract(t, ["People call me Bea", "ok"], {
      facts: [fact("name", "Bea", "People call me Bea")],
      entities: [],
    });
    const { episodeId } = await extract(t, ["I play the cello", "ok"], {
      facts: [fact("plays", "cello", "I play the cello", { subject: "Bea" })],
      entities: [],
    });
    expect(await episodeReport(t, episodeId)).toEqual(report(1, 1));
    expect((await facts(t)).map((f) => `${f.subject} ${f.predicate} ${f.object}`)).toEqual([
      "user name Bea",
      "user plays cello",
    ]);
    // Another project's stored name is not this user's.
    const other = await tenant();
    const { episodeId: elsewhere } = await extract(other, ["I play the cello", "ok"], {
      facts: [fact("plays", "cello", "I play the cello", { subject: "Bea" })],
      entities: [],
    });
    expect(await episodeReport(other, elsewhere)).toEqual(report(1, 0, { notAboutUser: 1 }));
  });

  it("is null until an extraction completes: a failed one records nothing", async () => {
    const t = await tenant();
    const { episodeId } = await extract(t, ["I live in Lisbon", "ok"], () => {
      throw new Error("boom");
    });
    expect((await t.episode(episodeId)).status).toBe("completed");
    expect(await episodeReport(t, episodeId)).toBeNull();
    expect(extractedLines(episodeId)).toEqual([]);
  });

  it("an episode without a user message completes with an empty report and no model call", async () => {
    const t = await tenant();
    const threadId = await t.thread("ds");
    await t.say(threadId, "Hello, how can I help?", "assistant");
    const { episodeId } = await t.end(threadId);
    await runDueJobs(h.svc.deps);
    expect(h.fake.chatCalls("fact_extraction")).toHaveLength(0);
    expect(await episodeReport(t, episodeId as string)).toEqual(report(0, 0));
    expect(extractedLines(episodeId as string)).toEqual([expect.objectContaining({ proposed: 0, kept: 0 })]);
  });
});
