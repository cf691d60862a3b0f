import { useRef, useState } from "preact/hooks";
import { api, type Schemas, unwrap } from "../api/client";
import { Button } from "../components/button";
import { Empty, ErrorMessage, Progress } from "../components/status";
import { formatDateTime, formatNumber } from "../lib/format";
import { href } from "../lib/router";
import { useAction, useLoad } from "../lib/use-load";
import { type BrowseProps, offsetOf, PAGE, RoutePager, useLastPageWhenEmpty } from "./browse-common";

type Thread = Schemas["Thread"];
type BrowseMessage = Schemas["BrowseMessage"];

/** Messages per page of a thread (newest page first, older pages on demand). */
const MESSAGE_PAGE = 50;

function ThreadStatus({ thread }: { thread: Thread }) {
  return thread.endedAt ? (
    <span class="badge muted" title={`Ended ${formatDateTime(thread.endedAt)}`}>
      ended
    </span>
  ) : (
    <span class="badge ok">open</span>
  );
}

/** `data/<dataset>/threads`: the dataset's threads, newest first. */
export function ThreadsPage({ projectId, dataset, query }: BrowseProps) {
  const offset = offsetOf(query);
  const list = useLoad(
    () =>
      unwrap(api.GET("/dashboard/browse/threads", { params: { query: { projectId, dataset, limit: PAGE, offset } } })),
    [projectId, dataset, offset],
    [projectId, dataset],
  );
  const data = list.data;
  const parts = ["projects", projectId, "data", dataset, "threads"];
  useLastPageWhenEmpty(
    parts,
    query,
    list.loading ? undefined : data && { rows: data.threads.length, total: data.total },
  );
  return (
    <div class="browse-region">
      <h3 class="visually-hidden">Threads</h3>
      <Progress active={list.loading} label="Loading threads" />
      <ErrorMessage error={list.error} />
      {data && data.threads.length === 0 && <Empty>No threads in this dataset.</Empty>}
      {data && data.threads.length > 0 && (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Threads of {dataset}</caption>
            <thead>
              <tr>
                <th scope="col">Thread</th>
                <th scope="col">Status</th>
                <th scope="col" class="num">
                  Messages
                </th>
                <th scope="col">Last message</th>
                <th scope="col">Created</th>
                <th scope="col">Tags</th>
              </tr>
            </thead>
            <tbody>
              {data.threads.map((t) => (
                <tr key={t.threadId}>
                  <td>
                    <a href={href("projects", projectId, "data", dataset, "threads", t.threadId)} class="mono">
                      {t.threadId}
                    </a>
                  </td>
                  <td>
                    <ThreadStatus thread={t} />
                  </td>
                  <td class="num">{formatNumber(t.messageCount)}</td>
                  <td class="nowrap">{formatDateTime(t.lastMessageAt)}</td>
                  <td class="nowrap">{formatDateTime(t.createdAt)}</td>
                  <td>{t.tags.length > 0 ? t.tags.join(", ") : "—"}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {data && <RoutePager parts={parts} query={query} total={data.total} label="Thread pages" />}
    </div>
  );
}

/**
 * `data/<dataset>/threads/<id>`: the thread and its messages in reading order (oldest first). The
 * newest page loads first; "Load older messages" prepends the previous page. Every row is listed:
 * compacted ones (folded into a summary, out of prepare's window) dimmed, summary rows marked, and
 * the active summary repeated at the top. A thread of another dataset than the route's is "Thread
 * not found", as an unknown one is.
 */
export function ThreadPage({ projectId, dataset, threadId }: BrowseProps & { threadId: string }) {
  const first = useLoad(
    () =>
      unwrap(
        api.GET("/dashboard/browse/threads/{id}/messages", {
          params: { path: { id: threadId }, query: { projectId, dataset, limit: MESSAGE_PAGE } },
        }),
      ),
    [projectId, dataset, threadId],
  );
  // Older pages, oldest first, and the cursor to the page before them (undefined: none loaded yet).
  const [older, setOlder] = useState<{ messages: BrowseMessage[]; cursor: string | null | undefined }>({
    messages: [],
    cursor: undefined,
  });
  const cursor = older.cursor === undefined ? first.data?.nextCursor : older.cursor;
  const list = useRef<HTMLOListElement>(null);
  const loadOlder = useAction(async () => {
    if (!cursor) return;
    const page = await unwrap(
      api.GET("/dashboard/browse/threads/{id}/messages", {
        params: { path: { id: threadId }, query: { projectId, dataset, limit: MESSAGE_PAGE, before: cursor } },
      }),
    );
    setOlder((o) => ({ messages: [...page.messages, ...o.messages], cursor: page.nextCursor }));
    // Nothing older left: the button goes, and the keyboard continues in what was loaded.
    if (!page.nextCursor) list.current?.focus();
  });

  const data = first.data;
  const messages = data ? [...older.messages, ...data.messages] : [];
  const compacted = messages.filter((m) => m.compacted).length;
  const summaries = messages.filter((m) => m.summary).length;
  return (
    <div class="browse-region">
      <nav aria-label="Back" class="back-link">
        <a href={href("projects", projectId, "data", dataset, "threads")}>← All threads</a>
      </nav>
      <h3 class="thread-title">
        Thread <span class="mono wrap-anywhere">{threadId}</span>
      </h3>
      <Progress active={first.loading} label="Loading messages" />
      <ErrorMessage error={first.error} />
      {data && (
        <>
          <dl class="meta-list">
            <div>
              <dt>Status</dt>
              <dd>
                <ThreadStatus thread={data.thread} />
                {data.thread.endedAt && <span class="hint"> {formatDateTime(data.thread.endedAt)}</span>}
              </dd>
            </div>
            <div>
              <dt>Messages</dt>
              <dd>{formatNumber(data.thread.messageCount)}</dd>
            </div>
            <div>
              <dt>Shown</dt>
              <dd>
                {formatNumber(messages.length)} ({formatNumber(compacted)} compacted, {formatNumber(summaries)}{" "}
                {summaries === 1 ? "summary" : "summaries"})
              </dd>
            </div>
            <div>
              <dt>Created</dt>
              <dd>{formatDateTime(data.thread.createdAt)}</dd>
            </div>
            <div>
              <dt>Last message</dt>
              <dd>{formatDateTime(data.thread.lastMessageAt)}</dd>
            </div>
            {data.thread.tags.length > 0 && (
              <div>
                <dt>Tags</dt>
                <dd>{data.thread.tags.join(", ")}</dd>
              </div>
            )}
            {Object.keys(data.thread.settings.episodic ?? {}).length > 0 && (
              <div>
                <dt>Episodic override</dt>
                <dd>
                  <code>{JSON.stringify(data.thread.settings.episodic)}</code>
                </dd>
              </div>
            )}
          </dl>
          {data.activeSummary && (
            <section class="card summary-panel" aria-labelledby="active-summary-title">
              <h4 id="active-summary-title">Active summary</h4>
              <p class="hint">
                What prepare puts first in the window, in place of the compacted messages. Written{" "}
                {formatDateTime(data.activeSummary.createdAt)} as message #{data.activeSummary.sequenceNumber}.
              </p>
              <div class="msg-content">{data.activeSummary.content}</div>
            </section>
          )}
          <div class="older">
            {cursor ? (
              <Button onClick={() => void loadOlder.run()} disabled={loadOlder.pending}>
                {loadOlder.pending ? "Loading older messages…" : "Load older messages"}
              </Button>
            ) : (
              messages.length > 0 && <p class="hint">Beginning of the thread.</p>
            )}
            <Progress active={loadOlder.pending} label="Loading older messages" />
            <ErrorMessage error={loadOlder.error} />
          </div>
          {messages.length === 0 ? (
            <Empty>No messages in this thread.</Empty>
          ) : (
            <ol class="messages" aria-label="Messages, oldest first" tabIndex={-1} ref={list}>
              {messages.map((m) => (
                <MessageItem key={m.messageId} message={m} />
              ))}
            </ol>
          )}
        </>
      )}
    </div>
  );
}

function MessageItem({ message: m }: { message: BrowseMessage }) {
  const classes = ["msg", `role-${m.role}`, m.compacted && "is-compacted", m.summary && "is-summary"]
    .filter(Boolean)
    .join(" ");
  const tokens = m.tokens?.total ?? (m.tokens ? (m.tokens.input ?? 0) + (m.tokens.output ?? 0) : null);
  return (
    <li class={classes}>
      <div class="msg-head">
        <strong class="msg-role">{m.role}</strong>
        <span class="hint">#{m.sequenceNumber}</span>
        {m.summary && <span class="badge warn">summary</span>}
        {m.compacted && (
          <span class="badge muted" title={`Compacted ${formatDateTime(m.compactedAt)}`}>
            compacted
          </span>
        )}
        <time class="hint" dateTime={m.createdAt}>
          {formatDateTime(m.createdAt)}
        </time>
        {(m.model || tokens || m.latencyMs !== null || m.metadata?.agentName) && (
          <span class="hint msg-telemetry">
            {[
              m.metadata?.agentName,
              m.model,
              tokens ? `${formatNumber(tokens)} tokens` : null,
              m.latencyMs !== null ? `${formatNumber(m.latencyMs)} ms` : null,
              m.metadata?.stopReason ? `stop: ${m.metadata.stopReason}` : null,
            ]
              .filter(Boolean)
              .join(" · ")}
          </span>
        )}
      </div>
      <div class="msg-content">{m.content}</div>
    </li>
  );
}
