/**
 * Plain text helpers every part of lib/ uses on what users and models write (a leaf: it imports
 * nothing, so recall, the model client and the evidence index can all lean on it).
 */

/**
 * Collapses every run of whitespace (newlines included) to one space: one line per item. Besides
 * what `\s` matches, the line breaks other readers split on (Python's `splitlines`, Unicode's
 * NEL): U+001C-U+001E and U+0085. Otherwise a user's words could start a line of their own in
 * the block, such as a fake heading.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: U+001C-U+001E are the line breaks meant here
export const oneLine = (text: string) => text.replace(/[\s\u001c-\u001e\u0085]+/gu, " ").trim();

let graphemeSegmenter: Intl.Segmenter | undefined;
const graphemes = () => {
  graphemeSegmenter ??= new Intl.Segmenter(undefined, { granularity: "grapheme" });
  return graphemeSegmenter;
};

/**
 * The head of `text` of at most `max` UTF-16 units, ending between two graphemes (an emoji with
 * its modifiers, a letter with its accents): a cut inside a surrogate pair would leave a lone
 * surrogate in the JSON response and the prompt. Between two code points instead when the last
 * whole grapheme ends before half of `max` (a letter under hundreds of combining marks).
 */
export function headOf(text: string, max: number): string {
  if (text.length <= max) return text;
  if (max <= 0) return "";
  // The grapheme holding the first unit past the head starts where the head may end. Whether a
  // grapheme starts at an index depends on the text before it and the character there (UAX #29),
  // so a few units past the cut decide it; a megabyte's message segmented whole took 10 ms.
  const end =
    graphemes()
      .segment(text.slice(0, max + 8))
      .containing(max)?.index ?? max;
  if (end > max / 2) return text.slice(0, end);
  const code = text.charCodeAt(max - 1);
  return code >= 0xd800 && code <= 0xdbff ? text.slice(0, max - 1) : text.slice(0, max);
}
