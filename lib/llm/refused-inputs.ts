import { ProviderError } from "../errors";
import { headOf } from "../text";
import { EMBEDDING_PROBE_TEXT, isInputRefusal } from "./client";

/**
 * What of a text is embedded when the provider refuses it whole (a model with a short window:
 * 512 tokens for many served by vLLM or TEI): its first 500 characters, about 125 tokens of
 * English and within such a window for most scripts.
 */
export const EMBED_HEAD_CHARS = 500;

/** One embedding call: a vector per text, in order. */
export type EmbedTexts = (texts: string[]) => Promise<number[][]>;

/**
 * The vectors of `texts`, in order, and null for a text the provider refuses even alone and by
 * its first EMBED_HEAD_CHARS: such a message is left without a vector (searchable by keyword)
 * rather than holding back every message after it, run after run (lib/evidence/embed.ts). A
 * batch refused whole (an input over the model's window, a request over its token limit:
 * isInputRefusal) is embedded in halves, down to the texts refused, a few calls for each. Before that, a text of our own: the provider
 * refusing it too refuses any request (a setting, not an input), so the batch's refusal is thrown
 * and the job retries the batch later, and no message is given up for it.
 */
export async function embedOrRefuse(embed: EmbedTexts, texts: string[]): Promise<(number[] | null)[]> {
  try {
    return await embed(texts);
  } catch (err) {
    if (!isInputRefusal(err)) throw err;
    try {
      await embed([EMBEDDING_PROBE_TEXT]);
    } catch (probeErr) {
      throw isInputRefusal(probeErr) ? err : probeErr;
    }
    return embedHalves(embed, texts);
  }
}

/** `texts`, refused together, embedded in two halves, each split again if refused. */
async function embedHalves(embed: EmbedTexts, texts: string[]): Promise<(number[] | null)[]> {
  if (texts.length === 1) return [await embedHead(embed, texts[0])];
  const half = Math.ceil(texts.length / 2);
  const parts: (number[] | null)[] = [];
  for (const part of [texts.slice(0, half), texts.slice(half)]) {
    try {
      parts.push(...(await embed(part)));
    } catch (err) {
      if (!isInputRefusal(err)) throw err;
      parts.push(...(await embedHalves(embed, part)));
    }
  }
  return parts;
}

/** A text refused alone: its first EMBED_HEAD_CHARS once, else null. */
async function embedHead(embed: EmbedTexts, text: string): Promise<number[] | null> {
  const head = headOf(text, EMBED_HEAD_CHARS);
  if (head === text) return null;
  try {
    return (await embed([head]))[0];
  } catch (err) {
    if (!isInputRefusal(err)) throw err;
    return null;
  }
}

/**
 * Every text's vector, a text refused whole embedded by its head (embedOrRefuse); one refused even
 * then fails the call, as the work needs them all (an episode's summary, an extraction's facts).
 */
export async function embedAllOrHeads(embed: EmbedTexts, texts: string[]): Promise<number[][]> {
  const vectors = await embedOrRefuse(embed, texts);
  return vectors.map((v) => {
    if (!v) throw new ProviderError("Embedding call refused a text, whole and by its first 500 characters");
    return v;
  });
}
