import { useEffect } from "preact/hooks";
import { Pager } from "../components/status";
import { lastPageOffset, offsetOf } from "../lib/paging";
import { href, navigate } from "../lib/router";

export { offsetOf };

export type Query = Record<string, string | number | boolean | undefined | null>;

/** What every browse view gets: the project, the dataset and the route's query (filters, paging). */
export interface BrowseProps {
  projectId: string;
  dataset: string;
  query: URLSearchParams;
}

/** Page size of the browse lists. */
export const PAGE = 20;

/** The link to the same view with some query parameters changed (undefined/"" removes one). */
export function withQuery(parts: string[], query: URLSearchParams, changes: Query): string {
  return href(...parts, { ...Object.fromEntries(query), ...changes });
}

/**
 * A page left empty (its last rows deleted) or past the end (an `?offset=` beyond the total) goes
 * to the last page that has rows, in place of its history entry, as the management lists do.
 * `page` is what the current offset loaded (undefined while it loads).
 */
export function useLastPageWhenEmpty(
  parts: string[],
  query: URLSearchParams,
  page: { rows: number; total: number } | undefined,
) {
  const offset = offsetOf(query);
  const to = page && page.rows === 0 && offset > 0 ? lastPageOffset(page.total, PAGE) : undefined;
  useEffect(() => {
    if (to !== undefined) navigate(withQuery(parts, query, { offset: to || undefined }), { replace: true });
  }, [to, offset]);
}

/** The pager of a browse list: its offset lives in the route's query, so Back and reload keep it. */
export function RoutePager({
  parts,
  query,
  total,
  label,
}: {
  parts: string[];
  query: URLSearchParams;
  total: number;
  label: string;
}) {
  return (
    <Pager
      offset={offsetOf(query)}
      limit={PAGE}
      total={total}
      label={label}
      onChange={(o) => navigate(withQuery(parts, query, { offset: o || undefined }))}
    />
  );
}

/** `thr_4k2jx9…`: enough of an id to tell rows apart (the full id is in the title). */
export function shortId(id: string): string {
  return id.length > 12 ? id.slice(0, 12) : id;
}

export function ShortId({ id }: { id: string }) {
  return (
    <code class="short-id" title={id}>
      {shortId(id)}
    </code>
  );
}
