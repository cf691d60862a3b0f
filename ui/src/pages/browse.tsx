import { href } from "../lib/router";
import { DatasetsPage } from "./browse-datasets";
import { EntitiesPage, EntityPage } from "./browse-entities";
import { EpisodesPage } from "./browse-episodes";
import { FactsPage } from "./browse-facts";
import { ThreadPage, ThreadsPage } from "./browse-threads";
import "./browse.css";

const SECTIONS = [
  ["threads", "Threads"],
  ["episodes", "Episodes"],
  ["facts", "Facts"],
  ["entities", "Entities"],
] as const;
type Section = (typeof SECTIONS)[number][0];

/**
 * Memory browsing, `#/projects/<id>/data/...`: the datasets, then per dataset its threads (and a
 * thread's messages), episodes, facts and entities (and an entity's facts). Filters and paging live
 * in the route's query, so Back and a reload keep them.
 */
export function BrowsePage({
  projectId,
  parts,
  query,
}: {
  projectId: string;
  parts: string[];
  query: URLSearchParams;
}) {
  const [dataset, rawSection, id] = parts;
  if (!dataset) return <DatasetsPage projectId={projectId} query={query} />;
  const section: Section = SECTIONS.some(([key]) => key === rawSection) ? (rawSection as Section) : "threads";
  const props = { projectId, dataset, query };
  return (
    <div class="browse">
      <nav aria-label="Breadcrumb" class="breadcrumb">
        <ol>
          <li>
            <a href={href("projects", projectId, "data")}>Datasets</a>
          </li>
          <li>
            <a href={href("projects", projectId, "data", dataset, section)}>{dataset}</a>
          </li>
        </ol>
      </nav>
      <h2 class="browse-title">
        <span class="browse-title-kind">Dataset </span>
        {dataset}
      </h2>
      <nav class="subnav" aria-label="Dataset">
        {SECTIONS.map(([key, label]) => (
          <a
            key={key}
            href={href("projects", projectId, "data", dataset, key)}
            aria-current={section === key ? "page" : undefined}
          >
            {label}
          </a>
        ))}
      </nav>
      {section === "threads" ? (
        id ? (
          <ThreadPage key={id} {...props} threadId={id} />
        ) : (
          <ThreadsPage {...props} />
        )
      ) : section === "episodes" ? (
        <EpisodesPage {...props} />
      ) : section === "facts" ? (
        <FactsPage {...props} />
      ) : id ? (
        <EntityPage key={id} {...props} entityId={id} />
      ) : (
        <EntitiesPage {...props} />
      )}
    </div>
  );
}
