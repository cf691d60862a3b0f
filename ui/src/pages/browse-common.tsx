import { Pager } from "../components/status";
import { href, navigate } from "../lib/router";

export type Query = Record<string, string | number | boolean | undefined | null>;

/** What every browse view gets: the project, the dataset and the route's query (filters, paging). */
export interface BrowseProps {
  projectId: string;
  dataset: string;
  query: URLSearchParams;
}

/** Page size of the browse lists. */
export const PAGE = 20;

/** The route's `offset`, a non-negative integer (0 when absent or malformed). */
export function offsetOf(query: URLSearchParams): number {
  const n = Number(query.get("offset"));
  return Number.isInteger(n) && n > 0 ? n : 0;
}

/** The link to the same view with some query parameters changed (undefined/"" removes one). */
export function withQuery(parts: string[], query: URLSearchParams, changes: Query): string {
  return href(...parts, { ...Object.fromEntries(query), ...changes });
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
