import { api, unwrap } from "../api/client";
import { FactList } from "../components/fact-list";
import { ErrorMessage, Progress } from "../components/status";
import { formatNumber } from "../lib/format";
import { navigate } from "../lib/router";
import { useLoad } from "../lib/use-load";
import { type BrowseProps, offsetOf, PAGE, RoutePager, useLastPageWhenEmpty, withQuery } from "./browse-common";

/** The "Show invalidated facts" checkbox; its state is the route's `invalidated=1`. */
export function InvalidatedToggle({ parts, query }: { parts: string[]; query: URLSearchParams }) {
  return (
    <label class="check">
      <input
        type="checkbox"
        checked={query.get("invalidated") === "1"}
        onChange={(e) =>
          navigate(withQuery(parts, query, { invalidated: e.currentTarget.checked ? 1 : undefined, offset: undefined }))
        }
      />
      Show invalidated facts
    </label>
  );
}

/** `data/<dataset>/facts`: the dataset's facts, newest validAt first, live only unless asked. */
export function FactsPage({ projectId, dataset, query }: BrowseProps) {
  const offset = offsetOf(query);
  const includeInvalidated = query.get("invalidated") === "1";
  const list = useLoad(
    () =>
      unwrap(
        api.GET("/dashboard/browse/facts", {
          params: {
            query: {
              projectId,
              dataset,
              includeInvalidated,
              limit: PAGE,
              offset,
            },
          },
        }),
      ),
    [projectId, dataset, includeInvalidated, offset],
    [projectId, dataset],
  );
  const parts = ["projects", projectId, "data", dataset, "facts"];
  const data = list.data;
  useLastPageWhenEmpty(parts, query, list.loading ? undefined : data && { rows: data.facts.length, total: data.total });
  return (
    <div class="browse-region">
      <h3 class="visually-hidden">Facts</h3>
      <div class="inline-form filters">
        <InvalidatedToggle parts={parts} query={query} />
        {data && (
          <p class="hint filter-count" aria-live="polite">
            {formatNumber(data.total)} {includeInvalidated ? "" : "live "}fact{data.total === 1 ? "" : "s"}
          </p>
        )}
      </div>
      <Progress active={list.loading} label="Loading facts" />
      <ErrorMessage error={list.error} />
      {data && (
        <FactList
          facts={data.facts}
          projectId={projectId}
          dataset={dataset}
          onDeleted={list.reload}
          label={`Facts of ${dataset}`}
          empty={`${includeInvalidated ? "No facts in this dataset yet." : "No live facts in this dataset."} Facts are extracted from completed episodes.`}
        />
      )}
      {data && <RoutePager parts={parts} query={query} total={data.total} label="Fact pages" />}
    </div>
  );
}
