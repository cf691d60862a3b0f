import { useEffect, useRef, useState } from "preact/hooks";
import { api, type Schemas, unwrap } from "../api/client";
import { Button } from "../components/button";
import { Empty, ErrorMessage, Progress } from "../components/status";
import { describeExtraction, type ExtractionReport } from "../lib/extraction";
import { formatDateTime, formatNumber } from "../lib/format";
import { href, navigate } from "../lib/router";
import { useAction, useLoad } from "../lib/use-load";
import {
  type BrowseProps,
  offsetOf,
  PAGE,
  RoutePager,
  ShortId,
  shortId,
  useLastPageWhenEmpty,
  withQuery,
} from "./browse-common";

type BrowseEpisode = Schemas["BrowseEpisode"];

const STATUSES = ["pending", "processing", "completed", "failed", "archived"] as const;

const STATUS_CLASS: Record<string, string> = {
  completed: "ok",
  failed: "danger",
  pending: "muted",
  processing: "muted",
  skipped: "muted",
  archived: "archived",
};

export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge ${STATUS_CLASS[status] ?? "muted"}`}>{status}</span>;
}

/**
 * `data/<dataset>/episodes`: the dataset's episodes, newest first, with a status filter. Failed
 * ones show their error and can be retried; each shows its fact extraction (which /v1 hides) and,
 * once it completed, how many proposed facts it kept and why it dropped the others.
 */
export function EpisodesPage({ projectId, dataset, query }: BrowseProps) {
  const offset = offsetOf(query);
  const raw = query.get("status");
  const status = STATUSES.find((s) => s === raw);
  const list = useLoad(
    () =>
      unwrap(
        api.GET("/dashboard/browse/episodes", {
          params: { query: { projectId, dataset, status, limit: PAGE, offset } },
        }),
      ),
    [projectId, dataset, status, offset],
    [projectId, dataset],
  );
  const [retrying, setRetrying] = useState<string | null>(null);
  const [retried, setRetried] = useState<string | null>(null);
  const retry = useAction(async (id: string) => {
    setRetrying(id);
    setRetried(null);
    try {
      await unwrap(
        api.POST("/dashboard/browse/episodes/{id}/retry", { params: { path: { id }, query: { projectId } } }),
      );
      setRetried(id);
    } finally {
      setRetrying(null);
      // Refused too ("Only failed episodes can be retried": retried elsewhere): the list shows
      // the episode as it is now.
      focusAfter.current = id;
      list.reload();
    }
  });
  // The Retry button goes once the episode is pending: keep the keyboard on its card (or the list).
  const focusAfter = useRef<string | null>(null);
  const listRef = useRef<HTMLOListElement>(null);
  useEffect(() => {
    const id = focusAfter.current;
    if (!id || list.loading) return;
    focusAfter.current = null;
    const card = document.getElementById(`episode-${id}`)?.closest("article");
    (card ?? listRef.current)?.focus();
  }, [list.data, list.loading]);
  const parts = ["projects", projectId, "data", dataset, "episodes"];
  const data = list.data;
  useLastPageWhenEmpty(
    parts,
    query,
    list.loading ? undefined : data && { rows: data.episodes.length, total: data.total },
  );
  return (
    <div class="browse-region">
      <h3 class="visually-hidden">Episodes</h3>
      <div class="inline-form filters">
        <label class="field">
          <span>Status</span>
          <select
            value={status ?? ""}
            onChange={(e) =>
              navigate(withQuery(parts, query, { status: e.currentTarget.value || undefined, offset: undefined }))
            }
          >
            <option value="">All</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        {data && (
          <p class="hint filter-count" aria-live="polite">
            {formatNumber(data.total)} episode{data.total === 1 ? "" : "s"}
            {status ? ` ${status}` : ""}
          </p>
        )}
      </div>
      <Progress active={list.loading} label="Loading episodes" />
      <ErrorMessage error={list.error} />
      <ErrorMessage error={retry.error} />
      <p class="visually-hidden" aria-live="polite">
        {retried ? `Episode ${shortId(retried)} queued for another attempt.` : ""}
      </p>
      {data && data.episodes.length === 0 && (
        <Empty>{status ? `No ${status} episodes in this dataset.` : "No episodes in this dataset yet."}</Empty>
      )}
      {data && data.episodes.length > 0 && (
        <ol class="card-list episodes" ref={listRef} tabIndex={-1} aria-label="Episodes">
          {data.episodes.map((e) => (
            <EpisodeCard
              key={e.episodeId}
              episode={e}
              threadHref={href("projects", projectId, "data", dataset, "threads", e.threadId)}
              retrying={retrying === e.episodeId}
              onRetry={() => void retry.run(e.episodeId)}
            />
          ))}
        </ol>
      )}
      {data && <RoutePager parts={parts} query={query} total={data.total} label="Episode pages" />}
    </div>
  );
}

function EpisodeCard({
  episode: e,
  threadHref,
  retrying,
  onRetry,
}: {
  episode: BrowseEpisode;
  threadHref: string;
  retrying: boolean;
  onRetry: () => void;
}) {
  const titleId = `episode-${e.episodeId}`;
  const trigger = typeof e.metadata?.trigger === "string" ? e.metadata.trigger : null;
  return (
    <li>
      <article
        class={`card episode${e.status === "archived" ? " is-archived" : ""}`}
        aria-labelledby={titleId}
        tabIndex={-1}
      >
        <div class="episode-head">
          <h4 id={titleId}>
            Episode <ShortId id={e.episodeId} />
          </h4>
          <StatusBadge status={e.status} />
          {e.waitingFor === "budget" && (
            <span class="badge warn" title="Resumes by itself when the month ends or the budget is raised">
              waiting for the token budget
            </span>
          )}
          {trigger && <span class="hint">cut by {trigger}</span>}
          <span class="hint">
            thread{" "}
            <a href={threadHref} class="mono">
              {shortId(e.threadId)}
            </a>
          </span>
        </div>
        {e.status === "failed" && (
          <div class="episode-failure">
            <p class="error-text">
              <strong>Failed:</strong> {e.error ?? "no error recorded"}{" "}
              <span class="hint">
                ({formatNumber(e.retryCount)} retr{e.retryCount === 1 ? "y" : "ies"})
              </span>
            </p>
            <Button onClick={onRetry} disabled={retrying} aria-label={`Retry episode ${shortId(e.episodeId)}`}>
              {retrying ? "Retrying…" : "Retry"}
            </Button>
          </div>
        )}
        {e.summary ? <p class="episode-summary">{e.summary}</p> : <p class="hint">No summary yet.</p>}
        {e.keyLearnings.length > 0 && (
          <details class="learnings">
            <summary>
              Key learnings ({e.keyLearnings.length})
              <span class="visually-hidden"> of episode {shortId(e.episodeId)}</span>
            </summary>
            <ul>
              {e.keyLearnings.map((k, i) => (
                <li key={i}>{k}</li>
              ))}
            </ul>
          </details>
        )}
        <dl class="meta-list">
          <div>
            <dt>Messages</dt>
            <dd>{formatNumber(e.messageCount)}</dd>
          </div>
          <div>
            <dt>Time range</dt>
            <dd>
              {formatDateTime(e.startedAt)} – {formatDateTime(e.endedAt)}
            </dd>
          </div>
          <div>
            <dt>Fact extraction</dt>
            <dd>
              {e.extraction ? (
                <>
                  <StatusBadge status={e.extraction.status} />
                  {e.extraction.attempts > 0 && (
                    <span class="hint">
                      {" "}
                      {formatNumber(e.extraction.attempts)} attempt{e.extraction.attempts === 1 ? "" : "s"}
                    </span>
                  )}
                  {e.extraction.error && <span class="error-text"> {e.extraction.error}</span>}
                  {e.status === "completed" && e.extraction.status === "failed" && (
                    <>
                      {" "}
                      <Button
                        onClick={onRetry}
                        disabled={retrying}
                        aria-label={`Retry the fact extraction of episode ${shortId(e.episodeId)}`}
                      >
                        {retrying ? "Retrying…" : "Retry extraction"}
                      </Button>
                    </>
                  )}
                </>
              ) : (
                "—"
              )}
            </dd>
          </div>
          {e.extractionReport && (
            <div>
              <dt>Facts</dt>
              <dd>
                <ExtractionCounts report={e.extractionReport} />
              </dd>
            </div>
          )}
          <div>
            <dt>Created</dt>
            <dd>{formatDateTime(e.createdAt)}</dd>
          </div>
        </dl>
      </article>
    </li>
  );
}

/** "4 of 9 kept; dropped: 2 quote not found, 1 duplicate; ended 1 older fact". */
function ExtractionCounts({ report }: { report: ExtractionReport }) {
  const d = describeExtraction(report);
  return (
    <span class="extraction-counts">
      {d.kept}
      {d.dropped.length > 0 && <span class="hint">; dropped: {d.dropped.join(", ")}</span>}
      {d.ended && <span class="hint">; {d.ended}</span>}
    </span>
  );
}
