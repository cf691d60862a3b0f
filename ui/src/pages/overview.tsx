import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { api, unwrap } from "../api/client";
import { Button } from "../components/button";
import { ActivityChart } from "../components/overview-chart";
import { usePagedList } from "../components/paged-table";
import { Empty, ErrorMessage, Pager, Progress } from "../components/status";
import { formatDateTime, formatNumber } from "../lib/format";
import { href } from "../lib/router";
import { useAction, useLoad } from "../lib/use-load";
import "./overview.css";

const FAILURES_PAGE = 10;
const DAYS = 30;
/** Statuses listed even at 0, so the cards keep their size whatever the counts. */
const EPISODE_STATUSES = ["pending", "processing", "completed", "failed", "archived"];
const EXTRACTION_STATUSES = ["pending", "processing", "completed", "failed", "skipped"];

/** A project at a glance: counts, activity over the last 30 days, and what failed. */
export function OverviewPage({ projectId }: { projectId: string }) {
  const stats = useLoad(
    () => unwrap(api.GET("/dashboard/projects/{id}/stats", { params: { path: { id: projectId } } })),
    [projectId],
  );
  const activity = useLoad(
    () =>
      unwrap(
        api.GET("/dashboard/projects/{id}/activity", {
          params: { path: { id: projectId }, query: { days: DAYS } },
        }),
      ),
    [projectId],
  );
  // Paged per project: another project starts on its first page.
  const failures = usePagedList(
    (page) =>
      unwrap(
        api.GET("/dashboard/projects/{id}/extraction-failures", { params: { path: { id: projectId }, query: page } }),
      ).then((body) => ({ rows: body.failures, total: body.total })),
    [projectId],
    FAILURES_PAGE,
  );

  const s = stats.data?.stats;
  const count = (n: number | undefined) => (n === undefined ? "—" : formatNumber(n));
  const episodesTotal = s ? Object.values(s.episodes).reduce((a, b) => a + b, 0) : undefined;
  const failed = s?.extraction.failed ?? 0;

  return (
    <div class="overview">
      <section aria-labelledby="overview-counts-title">
        <h2 id="overview-counts-title" class="visually-hidden">
          Counts
        </h2>
        <Progress active={stats.loading} label="Loading counts" />
        <ErrorMessage error={stats.error} />
        <div class="overview-cards" aria-busy={stats.loading && !s}>
          <Card title="Threads" value={count(s?.threads)} />
          <Card title="Messages" value={count(s?.messages)} />
          <Card title="Entities" value={count(s?.entities)} />
          <Card title="Facts" value={count(s?.facts.live)} unit="live">
            <Breakdown entries={[["superseded", s?.facts.superseded]]} />
          </Card>
          <Card title="Episodes" value={count(episodesTotal)} unit="in all" wide>
            <Breakdown entries={statusEntries(EPISODE_STATUSES, s?.episodes)} alert="failed" />
          </Card>
          <Card
            title="Fact extraction"
            value={count(s ? failed : undefined)}
            unit="failed"
            alert={failed > 0}
            wide
            note="Of completed episodes, by fact-extraction status."
          >
            <Breakdown entries={statusEntries(EXTRACTION_STATUSES, s?.extraction)} alert="failed" />
          </Card>
        </div>
      </section>

      <section aria-labelledby="overview-activity-title" class="overview-activity">
        <h2 id="overview-activity-title">Activity</h2>
        <Progress active={activity.loading} label="Loading activity" />
        <ErrorMessage error={activity.error} />
        <div class="card overview-activity-body">
          <ActivityChart days={activity.data?.days} caption={`Episodes and facts per day (last ${DAYS} days)`} />
        </div>
      </section>

      <section aria-labelledby="overview-failures-title" class="overview-failures">
        <h2 id="overview-failures-title">
          Extraction failures
          {failures.total !== undefined && failures.total > 0 && (
            <>
              {" "}
              <span class="badge danger">{formatNumber(failures.total)}</span>
            </>
          )}
        </h2>
        <p class="hint">Completed episodes whose facts could not be extracted, newest first.</p>
        <Progress active={failures.loading} label="Loading extraction failures" />
        <ErrorMessage error={failures.error} />
        <div class="overview-failures-body">
          {failures.rows && failures.rows.length === 0 && <Empty>No extraction failures.</Empty>}
          {failures.rows && failures.rows.length > 0 && (
            <div class="table-wrap">
              <table aria-labelledby="overview-failures-title">
                <thead>
                  <tr>
                    <th scope="col">Episode</th>
                    <th scope="col">Dataset</th>
                    <th scope="col">Error</th>
                    <th scope="col" class="num">
                      Attempts
                    </th>
                    <th scope="col">Failed</th>
                  </tr>
                </thead>
                <tbody>
                  {failures.rows.map((f) => (
                    <tr key={f.episodeId}>
                      <td>
                        <a
                          class="mono overview-id"
                          href={href("projects", projectId, "data", f.dataset, "episodes")}
                          title={`Episodes of ${f.dataset}`}
                        >
                          {f.episodeId}
                        </a>
                      </td>
                      <td class="overview-dataset">{f.dataset}</td>
                      <td class="overview-error">{f.error ?? <span class="hint">No message</span>}</td>
                      <td class="num">{formatNumber(f.attempts)}</td>
                      <td class="overview-date">{formatDateTime(f.failedAt)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </div>
        {failures.paging && <Pager {...failures.paging} label="Extraction failure pages" />}
      </section>

      <FailingJobs projectId={projectId} />
    </div>
  );
}

/** What each job kind works on, as the overview names it. */
const JOB_KINDS: Record<string, string> = {
  "message-embed": "Message embeddings",
  episode: "Episode",
  "thread-idle": "Idle timer",
  webhook: "Webhook delivery",
};

/**
 * Background jobs that failed and wait to retry, each doubling its wait up to 32 minutes: after a
 * provider outage, why a thread's messages are not yet searchable by meaning, with "Retry now".
 */
function FailingJobs({ projectId }: { projectId: string }) {
  const jobs = usePagedList(
    (page) =>
      unwrap(
        api.GET("/dashboard/projects/{id}/failing-jobs", { params: { path: { id: projectId }, query: page } }),
      ).then((body) => ({ rows: body.jobs, total: body.total })),
    [projectId],
    FAILURES_PAGE,
  );
  const [retrying, setRetrying] = useState<string | null>(null);
  const retry = useAction(async (jobId: string) => {
    setRetrying(jobId);
    try {
      await unwrap(
        api.POST("/dashboard/projects/{id}/failing-jobs/{jobId}/retry", {
          params: { path: { id: projectId, jobId } },
        }),
      );
    } finally {
      setRetrying(null);
      // Refused too (it ran and succeeded meanwhile, or is running): the list shows it as it is.
      jobs.reload();
    }
  });
  return (
    <section aria-labelledby="overview-jobs-title" class="overview-failures">
      <h2 id="overview-jobs-title">
        Jobs retrying
        {jobs.total !== undefined && jobs.total > 0 && (
          <>
            {" "}
            <span class="badge danger">{formatNumber(jobs.total)}</span>
          </>
        )}
      </h2>
      <p class="hint">
        Background work that failed and waits to run again, each failure doubling the wait up to 32 minutes.
      </p>
      <Progress active={jobs.loading} label="Loading jobs retrying" />
      <ErrorMessage error={jobs.error} />
      <ErrorMessage error={retry.error} />
      <div class="overview-failures-body">
        {jobs.rows && jobs.rows.length === 0 && <Empty>No job is waiting to retry.</Empty>}
        {jobs.rows && jobs.rows.length > 0 && (
          <div class="table-wrap">
            <table aria-labelledby="overview-jobs-title">
              <thead>
                <tr>
                  <th scope="col">Job</th>
                  <th scope="col">Dataset</th>
                  <th scope="col">Error</th>
                  <th scope="col" class="num">
                    Attempts
                  </th>
                  <th scope="col">Next run</th>
                  <th scope="col">
                    <span class="visually-hidden">Action</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {jobs.rows.map((j) => (
                  <tr key={j.jobId}>
                    <td>
                      {JOB_KINDS[j.kind] ?? j.kind}
                      {j.subject && (
                        <>
                          {" "}
                          {j.dataset && (j.kind === "message-embed" || j.kind === "thread-idle") ? (
                            <a
                              class="mono overview-id"
                              href={href("projects", projectId, "data", j.dataset, "threads", j.subject)}
                            >
                              {j.subject}
                            </a>
                          ) : (
                            <span class="mono overview-id">{j.subject}</span>
                          )}
                        </>
                      )}
                    </td>
                    <td class="overview-dataset">{j.dataset ?? <span class="hint">—</span>}</td>
                    <td class="overview-error">{j.error ?? <span class="hint">No message</span>}</td>
                    <td class="num">{formatNumber(j.attempts)}</td>
                    <td class="overview-date">{j.running ? "Running" : formatDateTime(j.nextRunAt)}</td>
                    <td>
                      <Button
                        onClick={() => void retry.run(j.jobId)}
                        disabled={j.running || retrying === j.jobId}
                        aria-label={`Retry now: ${JOB_KINDS[j.kind] ?? j.kind} ${j.subject ?? j.jobId}`}
                      >
                        {retrying === j.jobId ? "Retrying…" : "Retry now"}
                      </Button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </div>
      {jobs.paging && <Pager {...jobs.paging} label="Pages of jobs retrying" />}
    </section>
  );
}

function statusEntries(order: string[], counts: Record<string, number> | undefined): [string, number | undefined][] {
  const extra = Object.keys(counts ?? {}).filter((k) => !order.includes(k));
  return [...order, ...extra].map((k) => [k, counts ? (counts[k] ?? 0) : undefined]);
}

function Card({
  title,
  value,
  unit,
  alert,
  wide,
  note,
  children,
}: {
  title: string;
  value: string;
  unit?: string;
  alert?: boolean;
  /** Spans two columns: the cards with a breakdown by status. */
  wide?: boolean;
  note?: string;
  children?: ComponentChildren;
}) {
  return (
    <div class={`card overview-card${wide ? " overview-wide" : ""}${alert ? " overview-alert" : ""}`}>
      <h3>{title}</h3>
      <p class="overview-value">
        {value}
        {unit && <span class="overview-unit"> {unit}</span>}
        {alert && (
          <>
            {" "}
            <span class="badge danger">Needs attention</span>
          </>
        )}
      </p>
      {children}
      {note && <p class="overview-note">{note}</p>}
    </div>
  );
}

/** Counts by status; `alert` names the status that turns red when above 0. */
function Breakdown({ entries, alert }: { entries: [string, number | undefined][]; alert?: string }) {
  return (
    <dl class="overview-breakdown">
      {entries.map(([label, n]) => (
        <div key={label} class={label === alert && n ? "overview-bad" : undefined}>
          <dt>{label}</dt>
          <dd>{n === undefined ? "—" : formatNumber(n)}</dd>
        </div>
      ))}
    </dl>
  );
}
