import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { ProviderError } from "../errors";
import { EMBEDDING_PROBE_TEXT } from "./client";
import { EMBED_HEAD_CHARS, embedAllOrHeads, embedOrRefuse } from "./refused-inputs";

describe("embedOrRefuse", () => {
  const failed = (status: number) =>
    new ProviderError("Embedding call failed", {
      cause: OpenAI.APIError.generate(status, { error: { message: "no" } }, "no", new Headers()),
    });
  /** A provider refusing any request with a text `refused` says is too long; a vector is [length]. */
  function provider(refused: (text: string) => boolean) {
    const calls: string[][] = [];
    const embed = async (texts: string[]) => {
      calls.push(texts);
      if (texts.some(refused)) throw failed(400);
      return texts.map((t) => [t.length]);
    };
    return { calls, embed };
  }
  const texts = Array.from({ length: 16 }, (_, i) => `message ${i}`);

  it("embeds a batch the provider takes in one call", async () => {
    const p = provider(() => false);
    expect(await embedOrRefuse(p.embed, texts)).toEqual(texts.map((t) => [t.length]));
    expect(p.calls).toHaveLength(1);
  });

  it("leaves a text refused alone and by its head as null, embeds every other in a few calls", async () => {
    const long = "x".repeat(EMBED_HEAD_CHARS + 1);
    const batch = texts.with(5, long);
    const p = provider((t) => t.startsWith("x"));
    const vectors = await embedOrRefuse(p.embed, batch);
    expect(vectors).toEqual(batch.map((t, i) => (i === 5 ? null : [t.length])));
    expect(p.calls[1]).toEqual([EMBEDDING_PROBE_TEXT]);
    expect(p.calls).toContainEqual([long.slice(0, EMBED_HEAD_CHARS)]);
    // The batch, the probe, two halves a level down to the text (4 levels), its head.
    expect(p.calls).toHaveLength(1 + 1 + 2 * 4 + 1);
  });

  it("embeds a text refused whole by its first EMBED_HEAD_CHARS", async () => {
    const long = `${"y".repeat(EMBED_HEAD_CHARS)}z`;
    const p = provider((t) => t.length > EMBED_HEAD_CHARS);
    expect(await embedOrRefuse(p.embed, ["short", long])).toEqual([[5], [EMBED_HEAD_CHARS]]);
  });

  it("splits a request over the provider's total until every part is taken, nothing left out", async () => {
    const p = provider(() => false);
    const overTotal = async (batch: string[]) => {
      if (batch.length > 3) throw failed(413);
      return p.embed(batch);
    };
    expect(await embedOrRefuse(overTotal, texts)).toEqual(texts.map((t) => [t.length]));
  });

  it("throws the batch's refusal when the provider refuses its own probe too (a setting, not an input)", async () => {
    const p = provider(() => true);
    await expect(embedOrRefuse(p.embed, texts)).rejects.toThrow("Embedding call failed");
    expect(p.calls).toHaveLength(2);
  });

  it("throws any other failure as it comes, on the batch or halfway through its halves", async () => {
    await expect(
      embedOrRefuse(async () => {
        throw failed(500);
      }, texts),
    ).rejects.toMatchObject({ cause: { status: 500 } });
    let calls = 0;
    const flaky = async (batch: string[]) => {
      calls++;
      if (calls === 1) throw failed(400);
      if (calls === 4) throw failed(503);
      return batch.map((t) => [t.length]);
    };
    await expect(embedOrRefuse(flaky, texts)).rejects.toMatchObject({ cause: { status: 503 } });
  });
});

describe("embedAllOrHeads", () => {
  const refusing = (refused: (t: string) => boolean) => async (texts: string[]) => {
    if (texts.some(refused)) {
      throw new ProviderError("Embedding call failed", {
        cause: OpenAI.APIError.generate(400, { error: { message: "too long" } }, "no", new Headers()),
      });
    }
    return texts.map((t) => [t.length]);
  };

  it("gives a text refused whole its head's vector", async () => {
    const long = "w".repeat(EMBED_HEAD_CHARS * 2);
    expect(
      await embedAllOrHeads(
        refusing((t) => t.length > EMBED_HEAD_CHARS),
        ["a", long],
      ),
    ).toEqual([[1], [EMBED_HEAD_CHARS]]);
  });

  it("fails when a text is refused by its head too", async () => {
    await expect(
      embedAllOrHeads(
        refusing((t) => t.startsWith("w")),
        ["a", "w".repeat(900)],
      ),
    ).rejects.toThrow(/refused a text, whole and by its first 500 characters/);
  });
});
