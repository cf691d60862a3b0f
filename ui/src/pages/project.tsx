import { useEffect, useRef } from "preact/hooks";
import { api, unwrap } from "../api/client";
import { ErrorMessage, Progress } from "../components/status";
import { href } from "../lib/router";
import { useLoad } from "../lib/use-load";
import { BrowsePage } from "./browse";
import { KeysPage } from "./keys";
import { OverviewPage } from "./overview";
import { PlaygroundPage } from "./playground";
import { SettingsPage } from "./settings";
import { UsagePage } from "./usage";
import { WebhooksPage } from "./webhooks";

const TABS = [
  ["overview", "Overview"],
  ["data", "Memory"],
  ["playground", "Recall playground"],
  ["keys", "API keys"],
  ["webhooks", "Webhooks"],
  ["usage", "Usage"],
  ["settings", "Settings"],
] as const;

/** One project: its tabs. `parts` are the route segments after `#/projects/<id>/`. */
export function ProjectPage({
  projectId,
  parts,
  query,
}: {
  projectId: string;
  parts: string[];
  query: URLSearchParams;
}) {
  const project = useLoad(
    () => unwrap(api.GET("/dashboard/projects/{id}", { params: { path: { id: projectId } } })),
    [projectId],
  );
  const [tab = "overview", ...rest] = parts;
  // On a phone the tab bar scrolls sideways: keep the current tab in sight after a direct link.
  const tabs = useRef<HTMLElement>(null);
  useEffect(() => {
    tabs.current?.querySelector('[aria-current="page"]')?.scrollIntoView({ block: "nearest", inline: "nearest" });
  }, [tab]);
  // No such project (a stale link, deleted elsewhere): its error alone, no tabs to act in.
  const missing = project.error?.status === 404;
  return (
    <section aria-labelledby="project-title">
      <p class="crumbs">
        <a href={href("projects")}>Projects</a> /
      </p>
      <h1 id="project-title" class="project-title">
        {project.data?.project.name ?? "\u00a0"}
      </h1>
      <Progress active={project.loading} label="Loading project" />
      <ErrorMessage error={project.error} />
      {!missing && (
        <nav class="tabs" aria-label="Project" ref={tabs}>
          {TABS.map(([key, label]) => (
            <a key={key} href={href("projects", projectId, key)} aria-current={tab === key ? "page" : undefined}>
              {label}
            </a>
          ))}
        </nav>
      )}
      {missing ? null : tab === "data" ? (
        <BrowsePage projectId={projectId} parts={rest} query={query} />
      ) : tab === "playground" ? (
        <PlaygroundPage projectId={projectId} query={query} />
      ) : tab === "keys" ? (
        <KeysPage projectId={projectId} />
      ) : tab === "webhooks" ? (
        <WebhooksPage projectId={projectId} />
      ) : tab === "usage" ? (
        <UsagePage projectId={projectId} />
      ) : tab === "settings" ? (
        <SettingsPage projectId={projectId} />
      ) : (
        <OverviewPage projectId={projectId} />
      )}
    </section>
  );
}
