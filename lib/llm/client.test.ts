import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ProviderError } from "../errors";
import {
  chatParams,
  checkJson,
  clientText,
  completionOf,
  heldAtEnd,
  isInputRefusal,
  isRefusal,
  newStreamState,
  recordedModel,
  repairTurn,
  reportedTokens,
  type StreamState,
  streamEndProblem,
  takeChunk,
  vectorsOf,
} from "./client";

describe("chatParams", () => {
  it("puts the system prompt first and max_tokens only when asked", () => {
    const messages = [{ role: "user" as const, content: "hi" }];
    expect(chatParams("m", { system: "be brief", messages })).toEqual({
      model: "m",
      messages: [{ role: "system", content: "be brief" }, ...messages],
    });
    expect(chatParams("m", { system: "s", messages, maxTokens: 50 })).toMatchObject({ max_tokens: 50 });
  });
});

describe("what the ledger records of an answer", () => {
  it("keeps token counts its integer columns hold; others are unknown", () => {
    expect(reportedTokens({ prompt_tokens: 12, completion_tokens: 3.6, total_tokens: 2 ** 31 - 1 })).toEqual({
      inputTokens: 12,
      outputTokens: 4,
      totalTokens: 2 ** 31 - 1,
    });
    expect(reportedTokens({ prompt_tokens: 2 ** 31, completion_tokens: -1, total_tokens: "7" })).toEqual({
      inputTokens: null,
      outputTokens: null,
      totalTokens: null,
    });
  });

  it("records the model the provider names, unless it is no storable name", () => {
    expect(recordedModel("gpt-4o-mini-2024-07-18", "gpt-4o-mini")).toBe("gpt-4o-mini-2024-07-18");
    for (const odd of [undefined, "", 42, "a\0b", "gpt-\ud800", "m".repeat(201)])
      expect(recordedModel(odd, "asked")).toBe("asked");
  });
});

describe("completionOf", () => {
  it("takes the first choice's text, the model the provider names and its usage", () => {
    const response = {
      model: "served-model",
      choices: [{ message: { content: "Hello" } }],
      usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
    } as unknown as OpenAI.ChatCompletion;
    expect(completionOf(response)).toEqual({
      text: "Hello",
      model: "served-model",
      tokens: { input: 3, output: 1, total: 4 },
    });
  });

  it("fails a reply without text, or of whitespace only", () => {
    for (const content of ["", " \n\t "]) {
      const empty = { model: "m", choices: [{ message: { content } }] } as unknown as OpenAI.ChatCompletion;
      expect(() => completionOf(empty)).toThrow(ProviderError);
    }
  });
});

describe("vectorsOf", () => {
  it("orders the vectors by index and checks their count and size", () => {
    const data = [
      { index: 1, embedding: [0, 1] },
      { index: 0, embedding: [1, 0] },
    ];
    expect(vectorsOf(data, 2, 2)).toEqual([
      [1, 0],
      [0, 1],
    ]);
    expect(() => vectorsOf(data, 3, 2)).toThrow("Embedding call returned 2 vectors of size 2 (expected 3 of 2)");
    expect(() => vectorsOf(data, 2, 3)).toThrow(ProviderError);
  });
});

describe("checkJson and repairTurn (JSON mode)", () => {
  const schema = z.object({ n: z.number() });

  it("accepts an object matching the schema, fenced or not", () => {
    expect(checkJson(schema, '{"n":1}')).toEqual({ ok: true, data: { n: 1 } });
    expect(checkJson(schema, '```json\n{"n":2}\n```')).toEqual({ ok: true, data: { n: 2 } });
  });

  it("names what is wrong: invalid JSON, or the paths that do not match", () => {
    expect(checkJson(schema, "n is 1")).toMatchObject({ ok: false, invalidJson: true });
    expect(checkJson(schema, '{"n":"1"}')).toMatchObject({
      ok: false,
      invalidJson: false,
      problem: expect.stringContaining("n:"),
    });
  });

  it("repairs with the answer as it was, then the problem", () => {
    expect(repairTurn("{}", "it does not match")).toEqual([
      { role: "assistant", content: "{}" },
      {
        role: "user",
        content:
          "That answer is not valid: it does not match. Answer again with only the corrected JSON object, matching the schema.",
      },
    ]);
  });
});

describe("isRefusal", () => {
  it("is a 400 or 422 from the provider, nothing else", () => {
    const apiError = (status: number) =>
      OpenAI.APIError.generate(status, { error: { message: "no" } }, "no", new Headers());
    expect([400, 422, 429, 500].map((s) => isRefusal(apiError(s)))).toEqual([true, true, false, false]);
    expect(isRefusal(new Error("400"))).toBe(false);
  });
});

describe("isInputRefusal", () => {
  it("is a 400, 413 or 422, bare or as the cause of the ProviderError a call throws", () => {
    const apiError = (status: number) =>
      OpenAI.APIError.generate(status, { error: { message: "no" } }, "no", new Headers());
    const statuses = [400, 413, 422, 429, 500, 503];
    expect(statuses.map((s) => isInputRefusal(apiError(s)))).toEqual([true, true, true, false, false, false]);
    const wrapped = (s: number) => new ProviderError("Embedding call failed", { cause: apiError(s) });
    expect(statuses.map((s) => isInputRefusal(wrapped(s)))).toEqual([true, true, true, false, false, false]);
    expect(isInputRefusal(new ProviderError("Embedding call failed: timed out"))).toBe(false);
  });
});

describe("takeChunk and streamEndProblem (streaming)", () => {
  const start = (): StreamState => ({ ...newStreamState("asked"), consumed: true });
  const chunk = (content: string | undefined, extra: Record<string, unknown> = {}) =>
    ({
      id: "c",
      object: "chat.completion.chunk",
      created: 0,
      model: "",
      choices: [{ index: 0, delta: content === undefined ? {} : { content }, finish_reason: null }],
      ...extra,
    }) as unknown as OpenAI.ChatCompletionChunk;

  it("gathers the text, the served model, the usage and the finish", () => {
    const state = start();
    expect(takeChunk(state, chunk("Hel", { model: "served" }))).toBe("Hel");
    expect(takeChunk(state, chunk(undefined))).toBeUndefined();
    expect(takeChunk(state, chunk("lo"))).toBe("lo");
    const last = chunk(undefined, { usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } });
    last.choices[0].finish_reason = "stop";
    takeChunk(state, last);
    expect(state).toMatchObject({ text: "Hello", model: "served", finished: true, usage: { total_tokens: 5 } });
    expect(streamEndProblem(state, 100)).toBeNull();
  });

  it("holds a high surrogate back for its low half in the next chunk; a lone one is U+FFFD", () => {
    const state = start();
    expect(takeChunk(state, chunk("a\ud83d"))).toBe("a");
    expect(takeChunk(state, chunk("\ude00b\udc00"))).toBe("\ud83d\ude00b\ufffd");
    expect(takeChunk(state, chunk("\ud800"))).toBeUndefined();
    expect(takeChunk(state, chunk("\ud800c"))).toBe("\ufffd\ufffdc");
    expect(takeChunk(state, chunk("\ud800"))).toBeUndefined();
    expect(heldAtEnd(state)).toBe("\ufffd");
    expect(heldAtEnd(state)).toBeUndefined();
    expect(state.text).toBe("a\ud83d\ude00b\ufffd\ufffd\ufffdc\ufffd");
    expect(clientText("", "\udc00\ud800")).toEqual({ text: "\ufffd", held: "\ud800" });
  });

  it("a stall, an end before the finish and an empty reply are problems, a stall first", () => {
    expect(streamEndProblem({ ...start(), stalled: true, finished: true, text: "x" }, 100)).toBe(
      "Model stream stalled: no data for 100 ms",
    );
    expect(streamEndProblem({ ...start(), text: "x" }, 100)).toBe("Model stream ended before the reply was complete");
    expect(streamEndProblem({ ...start(), finished: true }, 100)).toBe("Model call returned no content");
  });
});

/** A provider's answer whose reply is `content`. */
const replyOf = (content: string) => ({
  model: "m",
  choices: [
    {
      index: 0,
      finish_reason: "stop" as const,
      logprobs: null,
      message: { role: "assistant" as const, content, refusal: null },
    },
  ],
});

describe("NUL characters in a model's text", () => {
  const NUL = String.fromCharCode(0);

  it("are dropped from a reply, a streamed delta and a structured answer's strings (Postgres stores none)", () => {
    const reply = completionOf(replyOf(`a${NUL}b`));
    expect(reply.text).toBe("ab");
    const state = newStreamState("");
    const chunk = { choices: [{ index: 0, delta: { content: `c${NUL}` }, finish_reason: null }] };
    expect(takeChunk(state, chunk as OpenAI.ChatCompletionChunk)).toBe("c");
    const schema = z.object({ summary: z.string(), items: z.array(z.string()) });
    expect(checkJson(schema, '{"summary":"x\\u0000y","items":["\\u0000z"]}')).toEqual({
      ok: true,
      data: { summary: "xy", items: ["z"] },
    });
  });

  it("make a reply of NUL characters alone a reply without content", () => {
    const only = {
      model: "m",
      choices: [
        {
          index: 0,
          finish_reason: "stop",
          logprobs: null,
          message: { role: "assistant", content: NUL, refusal: null },
        },
      ],
    };
    expect(() => completionOf(only as OpenAI.ChatCompletion)).toThrow(ProviderError);
  });
});

describe("lone surrogates in a model's text", () => {
  const high = String.fromCharCode(0xd83d);
  const low = String.fromCharCode(0xde00);

  it("become U+FFFD in a reply and a structured answer's strings (jsonb refuses them)", () => {
    const reply = completionOf(replyOf(`a${high}b${low}${high}${low}`));
    expect(reply.text).toBe("a\ufffdb\ufffd😀");
    const schema = z.object({ summary: z.string() });
    expect(checkJson(schema, '{"summary":"x\\ud800y"}')).toEqual({ ok: true, data: { summary: "x\ufffdy" } });
  });

  it("keep a pair split across two streamed chunks whole (the delta waits for its low half)", () => {
    const state = newStreamState("");
    const chunk = (content: string) =>
      ({ choices: [{ index: 0, delta: { content }, finish_reason: null }] }) as OpenAI.ChatCompletionChunk;
    expect(takeChunk(state, chunk(`smile ${high}`))).toBe("smile ");
    expect(takeChunk(state, chunk(low))).toBe("😀");
    expect(state.text).toBe("smile 😀");
  });
});
