import { api, unwrap } from "../api/client";
import { Empty, ErrorMessage, Progress } from "../components/status";
import { formatDateTime, formatNumber } from "../lib/format";
import { href } from "../lib/router";
import { useLoad } from "../lib/use-load";
import { offsetOf, PAGE, RoutePager, useLastPageWhenEmpty } from "./browse-common";

/** `#/projects/<id>/data`: the project's datasets, most recently active first. */
export function DatasetsPage({ projectId, query }: { projectId: string; query: URLSearchParams }) {
  const offset = offsetOf(query);
  const list = useLoad(
    () => unwrap(api.GET("/dashboard/browse/datasets", { params: { query: { projectId, limit: PAGE, offset } } })),
    [projectId, offset],
    [projectId],
  );
  const data = list.data;
  const parts = ["projects", projectId, "data"];
  useLastPageWhenEmpty(
    parts,
    query,
    list.loading ? undefined : data && { rows: data.datasets.length, total: data.total },
  );
  return (
    <div class="browse">
      <h2>Datasets</h2>
      <p class="hint">
        A dataset is created by its first write. Each one owns its threads, messages, episodes, facts and entities.
      </p>
      <div class="browse-region">
        <Progress active={list.loading} label="Loading datasets" />
        <ErrorMessage error={list.error} />
        {data && data.datasets.length === 0 && (
          <Empty>No datasets yet. Write messages to a thread through the /v1 API with one of the project's keys.</Empty>
        )}
        {data && data.datasets.length > 0 && (
          <div class="table-wrap">
            <table>
              <caption class="visually-hidden">Datasets</caption>
              <thead>
                <tr>
                  <th scope="col">Dataset</th>
                  <th scope="col" class="num">
                    Threads
                  </th>
                  <th scope="col" class="num">
                    Messages
                  </th>
                  <th scope="col" class="num">
                    Episodes
                  </th>
                  <th scope="col" class="num">
                    Facts <span class="hint">(live / total)</span>
                  </th>
                  <th scope="col" class="num">
                    Entities
                  </th>
                  <th scope="col">Last activity</th>
                </tr>
              </thead>
              <tbody>
                {data.datasets.map((d) => (
                  <tr key={d.dataset}>
                    <td class="dataset-cell">
                      <a href={href("projects", projectId, "data", d.dataset, "threads")}>{d.dataset}</a>
                    </td>
                    <td class="num">{formatNumber(d.threads)}</td>
                    <td class="num">{formatNumber(d.messages)}</td>
                    <td class="num">{formatNumber(d.episodes)}</td>
                    <td class="num">
                      {formatNumber(d.liveFacts)} / {formatNumber(d.facts)}
                    </td>
                    <td class="num">{formatNumber(d.entities)}</td>
                    <td class="nowrap">{formatDateTime(d.lastActivityAt)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        {data && <RoutePager parts={parts} query={query} total={data.total} label="Dataset pages" />}
      </div>
    </div>
  );
}
