import { api, unwrap } from "../api/client";
import { FactList } from "../components/fact-list";
import { Empty, ErrorMessage, Progress } from "../components/status";
import { formatNumber } from "../lib/format";
import { href } from "../lib/router";
import { useLoad } from "../lib/use-load";
import { type BrowseProps, offsetOf, PAGE, RoutePager, useLastPageWhenEmpty } from "./browse-common";
import { InvalidatedToggle } from "./browse-facts";

/** `data/<dataset>/entities`: the dataset's entities by name, with their live fact counts. */
export function EntitiesPage({ projectId, dataset, query }: BrowseProps) {
  const offset = offsetOf(query);
  const list = useLoad(
    () =>
      unwrap(api.GET("/dashboard/browse/entities", { params: { query: { projectId, dataset, limit: PAGE, offset } } })),
    [projectId, dataset, offset],
    [projectId, dataset],
  );
  const data = list.data;
  const parts = ["projects", projectId, "data", dataset, "entities"];
  useLastPageWhenEmpty(
    parts,
    query,
    list.loading ? undefined : data && { rows: data.entities.length, total: data.total },
  );
  return (
    <div class="browse-region">
      <h3 class="visually-hidden">Entities</h3>
      <Progress active={list.loading} label="Loading entities" />
      <ErrorMessage error={list.error} />
      {data && data.entities.length === 0 && (
        <Empty>No entities in this dataset yet. They are extracted with facts.</Empty>
      )}
      {data && data.entities.length > 0 && (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Entities of {dataset}</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Type</th>
                <th scope="col" class="num">
                  Live facts
                </th>
              </tr>
            </thead>
            <tbody>
              {data.entities.map((e) => (
                <tr key={e.entityId}>
                  <td class="dataset-cell">
                    <a href={href("projects", projectId, "data", dataset, "entities", e.entityId)}>{e.name}</a>
                  </td>
                  <td>
                    <span class="entity-type">{e.type}</span>
                  </td>
                  <td class="num">{formatNumber(e.facts)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {data && <RoutePager parts={parts} query={query} total={data.total} label="Entity pages" />}
    </div>
  );
}

/** `data/<dataset>/entities/<id>`: one entity and every fact touching it. */
export function EntityPage({ projectId, dataset, query, entityId }: BrowseProps & { entityId: string }) {
  const includeInvalidated = query.get("invalidated") === "1";
  const load = useLoad(
    () =>
      unwrap(
        api.GET("/dashboard/browse/entities/{id}/facts", {
          params: {
            path: { id: entityId },
            // The route's dataset: an entity of another one is Entity not found.
            query: { projectId, dataset, includeInvalidated },
          },
        }),
      ),
    [projectId, dataset, entityId, includeInvalidated],
    [projectId, dataset, entityId],
  );
  const data = load.data;
  return (
    <div class="browse-region">
      <nav aria-label="Back" class="back-link">
        <a href={href("projects", projectId, "data", dataset, "entities")}>← All entities</a>
      </nav>
      <h3 class="entity-title">
        {data ? (
          <>
            {data.entity.name} <span class="entity-type">{data.entity.type}</span>
          </>
        ) : (
          "\u00a0"
        )}
      </h3>
      <div class="inline-form filters">
        <InvalidatedToggle parts={["projects", projectId, "data", dataset, "entities", entityId]} query={query} />
        {data && (
          <p class="hint filter-count" aria-live="polite">
            {formatNumber(data.facts.length)} {includeInvalidated ? "" : "live "}fact
            {data.facts.length === 1 ? "" : "s"}
          </p>
        )}
      </div>
      <Progress active={load.loading} label="Loading the entity's facts" />
      <ErrorMessage error={load.error} />
      {data && (
        <FactList
          facts={data.facts}
          projectId={projectId}
          dataset={dataset}
          onDeleted={load.reload}
          label={`Facts about ${data.entity.name}`}
          empty="No facts touch this entity."
        />
      )}
    </div>
  );
}
