import { type ComponentChildren, Fragment, type Ref } from "preact";
import { useEffect, useId, useState } from "preact/hooks";
import type { ApiError } from "../api/client";
import { lastPageOffset } from "../lib/paging";
import { useLoad } from "../lib/use-load";
import { Heading } from "./page";
import { Empty, ErrorMessage, Pager, Progress } from "./status";

/** Rows per page of the management lists. */
export const PAGE_SIZE = 20;

/** What a table shows: its rows once loaded, the load's progress and error, and how to load again. */
export interface TableList<T> {
  rows: T[] | undefined;
  loading: boolean;
  error: ApiError | undefined;
  /** Loads again (after a change), keeping the current rows on screen meanwhile. */
  reload: () => void;
}

/** A list the API pages with `limit` and `offset`, answering with the `total`. */
export interface PagedList<T> extends TableList<T> {
  total: number | undefined;
  paging: { offset: number; limit: number; total: number; onChange: (offset: number) => void } | undefined;
  /** Shows the first page, loaded again (where a new row appears). */
  first: () => void;
}

/**
 * A paged list. The offset belongs to the `key` it was chosen under: another project starts on
 * its first page at once, without first loading the previous one's offset, and so does the
 * first project again when you come back to it. A page left empty (its last rows removed) goes
 * back to the last page that has rows.
 */
export function usePagedList<T>(
  load: (page: { limit: number; offset: number }) => Promise<{ rows: T[]; total: number }>,
  key: unknown[],
  limit = PAGE_SIZE,
): PagedList<T> {
  const keyId = JSON.stringify(key);
  const [at, setAt] = useState({ keyId, offset: 0 });
  const offset = at.keyId === keyId ? at.offset : 0;
  const setOffset = (next: number) => setAt({ keyId, offset: next });
  // Forget the previous key's offset, so coming back to it starts on its first page too.
  useEffect(() => {
    if (at.keyId !== keyId) setAt({ keyId, offset: 0 });
  }, [keyId]);
  const list = useLoad(() => load({ limit, offset }), [keyId, limit, offset], [keyId]);
  const rows = list.data?.rows;
  const total = list.data?.total;
  useEffect(() => {
    if (rows && rows.length === 0 && offset > 0) setAt({ keyId, offset: lastPageOffset(total ?? 0, limit) });
  }, [rows, total, offset, keyId, limit]);
  return {
    rows,
    total,
    loading: list.loading,
    error: list.error,
    reload: list.reload,
    first: () => (offset === 0 ? list.reload() : setOffset(0)),
    paging: total === undefined ? undefined : { offset, limit, total, onChange: setOffset },
  };
}

export interface Column<T> {
  header: string;
  cell: (row: T) => ComponentChildren;
  /** The cells' class. */
  class?: string;
  /** The header's class (a column hidden on a phone hides both). */
  headerClass?: string;
}

/**
 * A page's table: named by a visible heading (`headingLevel`, which can take the focus back
 * through `headingRef`) or by a hidden caption; an action's error above it; progress, the load's
 * error and the empty state in a region that keeps its height, so nothing below jumps when the
 * rows arrive; the pager under it when the list is paged. `actions` fills a last column whose
 * header only a screen reader reads; `detail`, when it returns something, is a full-width row
 * under its row (an endpoint's deliveries), so what it shows sits next to what opened it.
 */
export function PagedTable<T>({
  title,
  headingLevel,
  headingRef,
  list,
  columns,
  rowKey,
  rowClass,
  actions,
  detail,
  empty,
  error,
  loadingLabel,
  pagerLabel,
}: {
  title: string;
  headingLevel?: 2 | 3;
  headingRef?: Ref<HTMLHeadingElement>;
  list: TableList<T> | PagedList<T>;
  columns: Column<T>[];
  rowKey: (row: T) => string;
  rowClass?: (row: T) => string | undefined;
  actions?: (row: T) => ComponentChildren;
  detail?: (row: T) => ComponentChildren;
  empty: ComponentChildren;
  error?: ApiError;
  loadingLabel: string;
  pagerLabel?: string;
}) {
  const id = useId();
  const { rows } = list;
  const paging = "paging" in list ? list.paging : undefined;
  return (
    <>
      {headingLevel && (
        <Heading level={headingLevel} id={id} headingRef={headingRef}>
          {title}
        </Heading>
      )}
      <ErrorMessage error={error} />
      <div class="paged-table">
        <Progress active={list.loading} label={loadingLabel} />
        <ErrorMessage error={list.error} />
        {rows && rows.length === 0 && <Empty>{empty}</Empty>}
        {rows && rows.length > 0 && (
          <div class="table-wrap">
            <table aria-labelledby={headingLevel ? id : undefined}>
              {!headingLevel && <caption class="visually-hidden">{title}</caption>}
              <thead>
                <tr>
                  {columns.map((c) => (
                    <th key={c.header} scope="col" class={c.headerClass}>
                      {c.header}
                    </th>
                  ))}
                  {actions && (
                    <th scope="col">
                      <span class="visually-hidden">Actions</span>
                    </th>
                  )}
                </tr>
              </thead>
              <tbody>
                {rows.map((row) => {
                  const more = detail?.(row);
                  return (
                    <Fragment key={rowKey(row)}>
                      <tr class={rowClass?.(row)}>
                        {columns.map((c) => (
                          <td key={c.header} class={c.class}>
                            {c.cell(row)}
                          </td>
                        ))}
                        {actions && <td class="actions-cell">{actions(row)}</td>}
                      </tr>
                      {more && (
                        <tr class="detail-row">
                          <td colSpan={columns.length + (actions ? 1 : 0)}>{more}</td>
                        </tr>
                      )}
                    </Fragment>
                  );
                })}
              </tbody>
            </table>
          </div>
        )}
      </div>
      {paging && <Pager {...paging} label={pagerLabel} />}
    </>
  );
}
