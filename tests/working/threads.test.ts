import { and, count, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { threads } from "../../lib/db/schema";
import type { ApiSchema, Issue, ValidationError } from "../helpers/api-types";
import { createTestService, newTenant, type TestService } from "../helpers/service";

let svc: TestService;
beforeAll(async () => {
  svc = await createTestService();
});
afterAll(() => svc.close());

type Thread = ApiSchema<"Thread">;

async function body<T>(res: Response): Promise<T> {
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  return (await res.json()) as T;
}

async function createThread(token: string, json: unknown = { dataset: "ds" }) {
  const res = await svc.request("/v1/threads", { method: "POST", token, json });
  expect(res.status).toBe(201);
  return body<Thread>(res);
}

async function threadCount(projectId: string) {
  const [{ n }] = await svc.deps.db.select({ n: count() }).from(threads).where(eq(threads.projectId, projectId));
  return n;
}

async function storedSettings(projectId: string, threadId: string) {
  const [row] = await svc.deps.db
    .select({ settings: threads.settings, tags: threads.tags })
    .from(threads)
    .where(and(eq(threads.projectId, projectId), eq(threads.id, threadId)));
  return row;
}

function expectValidation(b: ValidationError, path: (string | number)[]) {
  expect(b.error).toBe("Validation error");
  expect(Array.isArray(b.issues)).toBe(true);
  const issue = b.issues.find((i) => JSON.stringify(i.path) === JSON.stringify(path));
  expect(issue, `an issue at ${JSON.stringify(path)} in ${JSON.stringify(b.issues)}`).toBeDefined();
  expect(typeof issue?.code).toBe("string");
  expect(typeof issue?.message).toBe("string");
  expect(issue?.message.length).toBeGreaterThan(0);
  return issue as Issue & Record<string, unknown>;
}

describe("POST /v1/threads", () => {
  it("creates a thread and returns 201 with its fields", async () => {
    const t = await newTenant(svc);
    const before = Date.now();
    const res = await svc.request("/v1/threads", {
      method: "POST",
      token: t.key,
      json: { dataset: "support", tags: ["vip", "beta"], settings: { episodic: { maxMessages: 50 } } },
    });
    expect(res.status).toBe(201);
    const thread = await body<Thread>(res);
    expect(thread.threadId).toMatch(/^thr_[0-9a-z]{20}$/);
    expect(thread.dataset).toBe("support");
    expect(thread.tags).toEqual(["vip", "beta"]);
    expect(thread.settings).toEqual({ episodic: { maxMessages: 50 } });
    expect(thread.messageCount).toBe(0);
    expect(thread.lastMessageAt).toBeNull();
    expect(thread.endedAt).toBeNull();
    expect(new Date(thread.createdAt).toISOString()).toBe(thread.createdAt);
    expect(Date.parse(thread.createdAt)).toBeGreaterThanOrEqual(before - 1000);
    expect(Date.parse(thread.createdAt)).toBeLessThanOrEqual(Date.now() + 1000);
    expect(await threadCount(t.projectId)).toBe(1);
  });

  it("defaults tags to [] and settings to {}", async () => {
    const t = await newTenant(svc);
    const thread = await createThread(t.key, { dataset: "d" });
    expect(thread.tags).toEqual([]);
    expect(thread.settings).toEqual({});
  });

  it("creates a new thread on every call, even with the same body", async () => {
    const t = await newTenant(svc);
    const a = await createThread(t.key, { dataset: "same" });
    const b = await createThread(t.key, { dataset: "same" });
    const c = await createThread(t.key, { dataset: "same" });
    expect(new Set([a.threadId, b.threadId, c.threadId]).size).toBe(3);
    expect(await threadCount(t.projectId)).toBe(3);
  });

  it("drops duplicate tags", async () => {
    const t = await newTenant(svc);
    const thread = await createThread(t.key, { dataset: "d", tags: ["a", "b", "a"] });
    expect(thread.tags).toEqual(["a", "b"]);
  });

  it("stores tags with characters that are special in Postgres array literals exactly", async () => {
    const t = await newTenant(svc);
    const tags = ["a,b", "{x}", '"q"', "back\\slash", "NULL", " spaced ", "ünï 🚀", "'single'"];
    const thread = await createThread(t.key, { dataset: "d", tags });
    expect(thread.tags).toEqual(tags);
    expect((await storedSettings(t.projectId, thread.threadId)).tags).toEqual(tags);
    const got = await body<Thread>(await svc.request(`/v1/threads/${thread.threadId}`, { token: t.key }));
    expect(got.tags).toEqual(tags);
  });

  it.each([
    ["dataset", { dataset: "a\u0000b" }, ["dataset"]],
    ["a tag", { dataset: "d", tags: ["ok", "x\u0000"] }, ["tags", 1]],
  ])("rejects a NUL character in %s with 400, not a 500", async (_n, json, path) => {
    const t = await newTenant(svc);
    const res = await svc.request("/v1/threads", { method: "POST", token: t.key, json });
    expect(res.status).toBe(400);
    expectValidation(await body<ValidationError>(res), path);
    expect(await threadCount(t.projectId)).toBe(0);
  });

  it("accepts a dataset of exactly 1 and 256 characters", async () => {
    const t = await newTenant(svc);
    expect((await createThread(t.key, { dataset: "x" })).dataset).toBe("x");
    const long = "y".repeat(256);
    expect((await createThread(t.key, { dataset: long })).dataset).toBe(long);
    // Dots are names like any other, but for "." and "..", and each reaches its own routes.
    for (const dataset of ["...", ".x", "x.."]) {
      expect((await createThread(t.key, { dataset })).dataset).toBe(dataset);
      const res = await svc.request(`/v1/memory/recall/datasets/${encodeURIComponent(dataset)}/export`, {
        token: t.key,
      });
      expect((await body<{ dataset: string }>(res)).dataset).toBe(dataset);
    }
  });

  it.each([
    ["empty dataset", { dataset: "" }, ["dataset"], "too_small"],
    ["257-character dataset", { dataset: "z".repeat(257) }, ["dataset"], "too_big"],
    // No URL can name them (%2E%2E is a dot segment too): the dataset could never be read or erased.
    ["dataset named .", { dataset: "." }, ["dataset"], "custom"],
    ["dataset named ..", { dataset: ".." }, ["dataset"], "custom"],
    ["missing dataset", {}, ["dataset"], "invalid_type"],
    ["numeric dataset", { dataset: 42 }, ["dataset"], "invalid_type"],
    ["tags not an array", { dataset: "d", tags: "vip" }, ["tags"], "invalid_type"],
    ["empty tag", { dataset: "d", tags: [""] }, ["tags", 0], "too_small"],
    [
      "maxMessages 0 at thread level",
      { dataset: "d", settings: { episodic: { maxMessages: 0 } } },
      ["settings", "episodic", "maxMessages"],
      "too_small",
    ],
    [
      "maxMessages 1001",
      { dataset: "d", settings: { episodic: { maxMessages: 1001 } } },
      ["settings", "episodic", "maxMessages"],
      "too_big",
    ],
    [
      "maxMessages not an integer",
      { dataset: "d", settings: { episodic: { maxMessages: 2.5 } } },
      ["settings", "episodic", "maxMessages"],
      "invalid_type",
    ],
    [
      "autoEpisodeIntervalMs 999",
      { dataset: "d", settings: { episodic: { autoEpisodeIntervalMs: 999 } } },
      ["settings", "episodic", "autoEpisodeIntervalMs"],
      "too_small",
    ],
    [
      "maxRetries 11",
      { dataset: "d", settings: { episodic: { maxRetries: 11 } } },
      ["settings", "episodic", "maxRetries"],
      "too_big",
    ],
    [
      "contextEpisodes 0",
      { dataset: "d", settings: { episodic: { contextEpisodes: 0 } } },
      ["settings", "episodic", "contextEpisodes"],
      "too_small",
    ],
    [
      "similarityWeight 1.5",
      { dataset: "d", settings: { episodic: { similarityWeight: 1.5 } } },
      ["settings", "episodic", "similarityWeight"],
      "too_big",
    ],
    [
      "recencyWeight -0.1",
      { dataset: "d", settings: { episodic: { recencyWeight: -0.1 } } },
      ["settings", "episodic", "recencyWeight"],
      "too_small",
    ],
    [
      "enabled a string",
      { dataset: "d", settings: { episodic: { enabled: "yes" } } },
      ["settings", "episodic", "enabled"],
      "invalid_type",
    ],
  ])("rejects %s with 400 and writes nothing", async (_name, json, path, code) => {
    const t = await newTenant(svc);
    const res = await svc.request("/v1/threads", { method: "POST", token: t.key, json });
    expect(res.status).toBe(400);
    const issue = expectValidation(await body<ValidationError>(res), path);
    expect(issue.code).toBe(code);
    expect(await threadCount(t.projectId)).toBe(0);
  });

  it("reports the bound in a too_small issue", async () => {
    const t = await newTenant(svc);
    const res = await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "" } });
    const issue = expectValidation(await body<ValidationError>(res), ["dataset"]);
    expect(issue.minimum).toBe(1);
  });

  it("accepts thread-level bounds that a project would refuse (maxMessages 1)", async () => {
    const t = await newTenant(svc);
    const thread = await createThread(t.key, {
      dataset: "d",
      settings: { episodic: { maxMessages: 1, autoEpisodeIntervalMs: 1000, maxRetries: 0, contextEpisodes: 20 } },
    });
    const expected = { maxMessages: 1, autoEpisodeIntervalMs: 1000, maxRetries: 0, contextEpisodes: 20 };
    expect(thread.settings).toEqual({ episodic: expected });
    expect((await storedSettings(t.projectId, thread.threadId)).settings).toEqual({ episodic: expected });
  });

  it("accepts every episodic key at once", async () => {
    const t = await newTenant(svc);
    const episodic = {
      enabled: false,
      autoEpisodeIntervalMs: 60_000,
      maxMessages: 1000,
      maxRetries: 10,
      contextEpisodes: 1,
      similarityWeight: 0,
      recencyWeight: 1,
    };
    const thread = await createThread(t.key, { dataset: "d", settings: { episodic } });
    expect(thread.settings).toEqual({ episodic });
  });

  it("strips null values from the override before storing it", async () => {
    const t = await newTenant(svc);
    const thread = await createThread(t.key, {
      dataset: "d",
      settings: { episodic: { maxMessages: 5, enabled: null, autoEpisodeIntervalMs: null } },
    });
    expect(thread.settings).toEqual({ episodic: { maxMessages: 5 } });
    expect((await storedSettings(t.projectId, thread.threadId)).settings).toEqual({ episodic: { maxMessages: 5 } });
  });

  it("stores no episodic key at all when every value is null", async () => {
    const t = await newTenant(svc);
    const thread = await createThread(t.key, { dataset: "d", settings: { episodic: { enabled: null } } });
    expect(thread.settings).toEqual({});
    expect((await storedSettings(t.projectId, thread.threadId)).settings).toEqual({});
  });

  it("strips unknown fields silently, top level and inside settings", async () => {
    const t = await newTenant(svc);
    const res = await svc.request("/v1/threads", {
      method: "POST",
      token: t.key,
      json: {
        dataset: "d",
        projectId: "prj_someone_else",
        threadId: "thr_chosen_by_caller",
        extra: true,
        settings: { episodic: { maxMessages: 7, bogus: 1 }, semantic: { factsInContext: 3 } },
      },
    });
    expect(res.status).toBe(201);
    const thread = await body<Thread & Record<string, unknown>>(res);
    expect(thread.extra).toBeUndefined();
    expect(thread.projectId).toBeUndefined();
    expect(thread.threadId).not.toBe("thr_chosen_by_caller");
    expect(thread.settings).toEqual({ episodic: { maxMessages: 7 } });
    const stored = await storedSettings(t.projectId, thread.threadId);
    expect(stored.settings).toEqual({ episodic: { maxMessages: 7 } });
  });

  it("needs an API key", async () => {
    const res = await svc.request("/v1/threads", { method: "POST", json: { dataset: "d" } });
    expect(res.status).toBe(401);
    expect(await body<{ error: string }>(res)).toEqual({ error: "Missing or invalid Authorization header" });
  });
});

describe("GET /v1/threads/:id", () => {
  it("returns the thread as created", async () => {
    const t = await newTenant(svc);
    const created = await createThread(t.key, {
      dataset: "g",
      tags: ["x"],
      settings: { episodic: { recencyWeight: 0.5 } },
    });
    const res = await svc.request(`/v1/threads/${created.threadId}`, { token: t.key });
    expect(res.status).toBe(200);
    expect(await body<Thread>(res)).toEqual(created);
  });

  it("reflects appended messages in messageCount and lastMessageAt", async () => {
    const t = await newTenant(svc);
    const created = await createThread(t.key);
    for (const content of ["one", "two"]) {
      const add = await svc.request(`/v1/memory/working/threads/${created.threadId}/messages`, {
        method: "POST",
        token: t.key,
        json: { role: "user", content },
      });
      expect(add.status).toBe(201);
    }
    const got = await body<Thread>(await svc.request(`/v1/threads/${created.threadId}`, { token: t.key }));
    expect(got.messageCount).toBe(2);
    expect(got.lastMessageAt).not.toBeNull();
  });

  it("answers 404 Thread not found for an unknown id", async () => {
    const t = await newTenant(svc);
    const res = await svc.request("/v1/threads/thr_doesnotexist000000000", { token: t.key });
    expect(res.status).toBe(404);
    expect(await body<{ error: string }>(res)).toEqual({ error: "Thread not found" });
  });

  it("answers 404 for another tenant's thread, the same as for an unknown one", async () => {
    const owner = await newTenant(svc, "owner");
    const other = await newTenant(svc, "other");
    const thread = await createThread(owner.key);
    const res = await svc.request(`/v1/threads/${thread.threadId}`, { token: other.key });
    expect(res.status).toBe(404);
    expect(await body<{ error: string }>(res)).toEqual({ error: "Thread not found" });
    // The owner still sees it.
    expect((await svc.request(`/v1/threads/${thread.threadId}`, { token: owner.key })).status).toBe(200);
  });
});

describe("PATCH /v1/threads/:id", () => {
  it("replaces tags and leaves settings alone", async () => {
    const t = await newTenant(svc);
    const created = await createThread(t.key, {
      dataset: "p",
      tags: ["a", "b"],
      settings: { episodic: { maxMessages: 9 } },
    });
    const res = await svc.request(`/v1/threads/${created.threadId}`, {
      method: "PATCH",
      token: t.key,
      json: { tags: ["c"] },
    });
    expect(res.status).toBe(200);
    const patched = await body<Thread>(res);
    expect(patched.tags).toEqual(["c"]);
    expect(patched.settings).toEqual({ episodic: { maxMessages: 9 } });
    expect(patched.dataset).toBe("p");
    expect(patched.createdAt).toBe(created.createdAt);
    const stored = await storedSettings(t.projectId, created.threadId);
    expect(stored.tags).toEqual(["c"]);
  });

  it("clears tags with an empty list", async () => {
    const t = await newTenant(svc);
    const created = await createThread(t.key, { dataset: "p", tags: ["a"] });
    const res = await svc.request(`/v1/threads/${created.threadId}`, {
      method: "PATCH",
      token: t.key,
      json: { tags: [] },
    });
    expect(res.status).toBe(200);
    expect((await body<Thread>(res)).tags).toEqual([]);
  });

  it("merges settings.episodic into the existing override and keeps tags", async () => {
    const t = await newTenant(svc);
    const created = await createThread(t.key, {
      dataset: "p",
      tags: ["keep"],
      settings: { episodic: { maxMessages: 9, maxRetries: 2 } },
    });
    const res = await svc.request(`/v1/threads/${created.threadId}`, {
      method: "PATCH",
      token: t.key,
      json: { settings: { episodic: { maxRetries: 5, recencyWeight: 0.1, enabled: null } } },
    });
    expect(res.status).toBe(200);
    const patched = await body<Thread>(res);
    const expected = { maxMessages: 9, maxRetries: 5, recencyWeight: 0.1 };
    expect(patched.settings).toEqual({ episodic: expected });
    expect(patched.tags).toEqual(["keep"]);
    expect((await storedSettings(t.projectId, created.threadId)).settings).toEqual({ episodic: expected });
    // GET sees the same.
    const got = await body<Thread>(await svc.request(`/v1/threads/${created.threadId}`, { token: t.key }));
    expect(got.settings).toEqual({ episodic: expected });
  });

  it("a null removes that key's override (the project's setting applies again); a null episodic or settings is ignored", async () => {
    const t = await newTenant(svc);
    const created = await createThread(t.key, {
      dataset: "p",
      settings: { episodic: { maxMessages: 5, maxRetries: 2 } },
    });
    const patch = async (json: unknown) => {
      const res = await svc.request(`/v1/threads/${created.threadId}`, { method: "PATCH", token: t.key, json });
      expect(res.status).toBe(200);
      return (await body<Thread>(res)).settings;
    };
    // Removed, not kept: the key's (or a pinned value's) only way back to the project's value.
    expect(await patch({ settings: { episodic: { maxMessages: null } } })).toEqual({ episodic: { maxRetries: 2 } });
    expect(await patch({ settings: { episodic: null } })).toEqual({ episodic: { maxRetries: 2 } });
    expect(await patch({ settings: null })).toEqual({ episodic: { maxRetries: 2 } });
    expect(await patch({ settings: { episodic: { maxRetries: null, maxMessages: 7 } } })).toEqual({
      episodic: { maxMessages: 7 },
    });
    // At creation a null episodic (or settings) is no override, as null values are.
    for (const settings of [{ episodic: null }, null]) {
      const res = await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "p", settings } });
      expect(res.status).toBe(201);
      expect((await body<Thread>(res)).settings).toEqual({});
    }
  });

  it("adds an episodic override to a thread created without one", async () => {
    const t = await newTenant(svc);
    const created = await createThread(t.key, { dataset: "p" });
    const res = await svc.request(`/v1/threads/${created.threadId}`, {
      method: "PATCH",
      token: t.key,
      json: { settings: { episodic: { contextEpisodes: 4 } } },
    });
    expect(res.status).toBe(200);
    expect((await body<Thread>(res)).settings).toEqual({ episodic: { contextEpisodes: 4 } });
  });

  it("an override whose every key is removed goes: no override, as a thread created without one", async () => {
    const t = await newTenant(svc);
    const created = await createThread(t.key, { dataset: "p", settings: { episodic: { maxMessages: 3 } } });
    const res = await svc.request(`/v1/threads/${created.threadId}`, {
      method: "PATCH",
      token: t.key,
      json: { settings: { episodic: { maxMessages: null } } },
    });
    expect(res.status).toBe(200);
    expect((await body<Thread>(res)).settings).toEqual({});
    expect((await storedSettings(t.projectId, created.threadId)).settings).toEqual({});
  });

  it("moves updatedAt forward", async () => {
    const t = await newTenant(svc);
    const created = await createThread(t.key);
    await new Promise((r) => setTimeout(r, 5));
    const patched = await body<Thread>(
      await svc.request(`/v1/threads/${created.threadId}`, { method: "PATCH", token: t.key, json: { tags: ["n"] } }),
    );
    expect(Date.parse(patched.updatedAt)).toBeGreaterThan(Date.parse(created.updatedAt));
  });

  it.each([
    ["tags not an array", { tags: "x" }, ["tags"]],
    ["a tag over 100 characters", { tags: ["t".repeat(101)] }, ["tags", 0]],
    ["more than 50 tags", { tags: Array.from({ length: 51 }, (_, i) => `t${i}`) }, ["tags"]],
    ["maxMessages 0", { settings: { episodic: { maxMessages: 0 } } }, ["settings", "episodic", "maxMessages"]],
    [
      "autoEpisodeIntervalMs 999",
      { settings: { episodic: { autoEpisodeIntervalMs: 999 } } },
      ["settings", "episodic", "autoEpisodeIntervalMs"],
    ],
  ])("rejects %s with 400 and changes nothing", async (_name, json, path) => {
    const t = await newTenant(svc);
    const created = await createThread(t.key, {
      dataset: "p",
      tags: ["orig"],
      settings: { episodic: { maxMessages: 9 } },
    });
    const res = await svc.request(`/v1/threads/${created.threadId}`, { method: "PATCH", token: t.key, json });
    expect(res.status).toBe(400);
    expectValidation(await body<ValidationError>(res), path);
    const got = await body<Thread>(await svc.request(`/v1/threads/${created.threadId}`, { token: t.key }));
    expect(got).toEqual(created);
  });

  it("strips unknown fields (dataset cannot be changed)", async () => {
    const t = await newTenant(svc);
    const created = await createThread(t.key, { dataset: "orig" });
    const res = await svc.request(`/v1/threads/${created.threadId}`, {
      method: "PATCH",
      token: t.key,
      json: { dataset: "changed", tags: ["z"], bogus: 1 },
    });
    expect(res.status).toBe(200);
    const patched = await body<Thread & Record<string, unknown>>(res);
    expect(patched.dataset).toBe("orig");
    expect(patched.bogus).toBeUndefined();
    expect(patched.tags).toEqual(["z"]);
  });

  it("answers 404 for an unknown thread", async () => {
    const t = await newTenant(svc);
    const res = await svc.request("/v1/threads/thr_nope", { method: "PATCH", token: t.key, json: { tags: ["a"] } });
    expect(res.status).toBe(404);
    expect(await body<{ error: string }>(res)).toEqual({ error: "Thread not found" });
  });

  it("answers 404 for another tenant's thread and leaves it untouched", async () => {
    const owner = await newTenant(svc, "owner");
    const other = await newTenant(svc, "other");
    const created = await createThread(owner.key, {
      dataset: "p",
      tags: ["mine"],
      settings: { episodic: { maxMessages: 4 } },
    });
    const res = await svc.request(`/v1/threads/${created.threadId}`, {
      method: "PATCH",
      token: other.key,
      json: { tags: ["stolen"], settings: { episodic: { maxMessages: 8 } } },
    });
    expect(res.status).toBe(404);
    expect(await body<{ error: string }>(res)).toEqual({ error: "Thread not found" });
    const got = await body<Thread>(await svc.request(`/v1/threads/${created.threadId}`, { token: owner.key }));
    expect(got).toEqual(created);
  });
});

describe("POST /v1/threads/:id/end", () => {
  it("ends the thread and reports when", async () => {
    const t = await newTenant(svc);
    const created = await createThread(t.key, { dataset: "e" });
    const res = await svc.request(`/v1/threads/${created.threadId}/end`, { method: "POST", token: t.key });
    expect(res.status).toBe(200);
    const ended = await body<{ threadId: string; dataset: string; endedAt: string; episodeId: string | null }>(res);
    expect(Object.keys(ended).sort()).toEqual(["dataset", "endedAt", "episodeId", "threadId"]);
    expect(ended.episodeId).toBeNull(); // no messages: nothing to condense
    expect(ended.threadId).toBe(created.threadId);
    expect(ended.dataset).toBe("e");
    expect(new Date(ended.endedAt).toISOString()).toBe(ended.endedAt);
    const got = await body<Thread>(await svc.request(`/v1/threads/${created.threadId}`, { token: t.key }));
    expect(got.endedAt).toBe(ended.endedAt);
  });

  it("may be repeated, each call stamping a new endedAt", async () => {
    const t = await newTenant(svc);
    const created = await createThread(t.key);
    const first = await svc.request(`/v1/threads/${created.threadId}/end`, { method: "POST", token: t.key });
    expect(first.status).toBe(200);
    const a = await body<{ endedAt: string }>(first);
    await new Promise((r) => setTimeout(r, 5));
    const second = await svc.request(`/v1/threads/${created.threadId}/end`, { method: "POST", token: t.key });
    expect(second.status).toBe(200);
    const b = await body<{ endedAt: string }>(second);
    expect(Date.parse(b.endedAt)).toBeGreaterThan(Date.parse(a.endedAt));
  });

  it("does not stop the thread from taking messages", async () => {
    const t = await newTenant(svc);
    const created = await createThread(t.key);
    await svc.request(`/v1/threads/${created.threadId}/end`, { method: "POST", token: t.key });
    const add = await svc.request(`/v1/memory/working/threads/${created.threadId}/messages`, {
      method: "POST",
      token: t.key,
      json: { role: "user", content: "still here" },
    });
    expect(add.status).toBe(201);
  });

  it("answers 404 for an unknown thread", async () => {
    const t = await newTenant(svc);
    const res = await svc.request("/v1/threads/thr_unknown/end", { method: "POST", token: t.key });
    expect(res.status).toBe(404);
    expect(await body<{ error: string }>(res)).toEqual({ error: "Thread not found" });
  });

  it("answers 404 for another tenant's thread and does not end it", async () => {
    const owner = await newTenant(svc, "owner");
    const other = await newTenant(svc, "other");
    const created = await createThread(owner.key);
    const res = await svc.request(`/v1/threads/${created.threadId}/end`, { method: "POST", token: other.key });
    expect(res.status).toBe(404);
    const got = await body<Thread>(await svc.request(`/v1/threads/${created.threadId}`, { token: owner.key }));
    expect(got.endedAt).toBeNull();
  });
});
