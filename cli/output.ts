/** How a command answers: `--json` puts one JSON document on stdout; otherwise text for a person. */
export interface Output {
  json: boolean;
}

/** A column of a table: its heading and how a row shows in it. */
export type Column<T> = [heading: string, cell: (row: T) => string];

/** Rows as aligned columns under their headings, or a sentence when there are none. */
export function table<T>(rows: T[], columns: Column<T>[], empty: string): string {
  if (rows.length === 0) return empty;
  const cells = [
    columns.map(([heading]) => heading),
    ...rows.map((row) => columns.map(([, cell]) => printable(cell(row)))),
  ];
  const widths = columns.map((_, i) => Math.max(...cells.map((line) => line[i].length)));
  return cells
    .map((line) =>
      line
        .map((cell, i) => cell.padEnd(widths[i]))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

/**
 * A cell with its control and format characters escaped (`\u001b`, `\u202e`): names are stored as
 * given, and one holding an escape sequence would otherwise recolour or rewrite the operator's
 * terminal, a bidirectional override reorder its line, a line separator break it.
 */
export function printable(cell: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds.
  return cell.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\p{Cf}]/gu, (c) => {
    const code = c.codePointAt(0) ?? 0;
    return code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}

/** An ISO timestamp to the minute, in UTC; "-" for none. */
export function when(iso: string | null): string {
  return iso ? `${iso.slice(0, 16).replace("T", " ")}Z` : "-";
}

/** The answer: `data` as JSON, or `text` (a line or a table) for a person. */
export function print(out: Output, data: unknown, text: string): void {
  process.stdout.write(out.json ? `${JSON.stringify(data, null, 2)}\n` : `${text}\n`);
}

/** What a person should know beside the answer: on stderr (stdout may be captured), none with `--json`. */
export function note(out: Output, text: string): void {
  if (!out.json) process.stderr.write(`${text}\n`);
}
