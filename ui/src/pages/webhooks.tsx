import { useEffect, useRef, useState } from "preact/hooks";
import { api, type Schemas, unwrap } from "../api/client";
import { ConfirmDialog } from "../components/confirm";
import { CopyButton } from "../components/copy-button";
import { Empty, ErrorMessage, Progress } from "../components/status";
import { formatDateTime } from "../lib/format";
import { useAction, useLoad } from "../lib/use-load";

type Endpoint = Schemas["WebhookEndpoint"];
type EventType = Schemas["WebhookEventType"];

const EVENT_TYPES: EventType[] = [
  "episode.completed",
  "episode.failed",
  "facts.extracted",
  "thread.compacted",
  "dataset.erased",
  "usage.budget_exhausted",
];

function StatusBadge({ status }: { status: string }) {
  const tone = status === "succeeded" ? "ok" : status === "failed" ? "danger" : "";
  return <span class={`badge ${tone}`}>{status}</span>;
}

/**
 * A project's webhooks: register an endpoint (its signing secret is shown once, here), list them
 * with the last delivery and the next attempt, a disabled one's reason, its deliveries with every
 * attempt and a replay button.
 */
export function WebhooksPage({ projectId }: { projectId: string }) {
  const list = useLoad(() => unwrap(api.GET("/dashboard/webhooks", { params: { query: { projectId } } })), [projectId]);
  const [url, setUrl] = useState("");
  const [types, setTypes] = useState<EventType[]>(["episode.completed"]);
  const [fresh, setFresh] = useState<{ secret: string; url: string } | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  const freshHeading = useRef<HTMLHeadingElement>(null);
  const listHeading = useRef<HTMLHeadingElement>(null);

  const create = useAction(async () => {
    const body = await unwrap(api.POST("/dashboard/webhooks", { body: { projectId, url, eventTypes: types } }));
    setUrl("");
    setFresh({ secret: body.secret, url: body.endpoint.url });
    list.reload();
  });
  const [deleting, setDeleting] = useState<Endpoint | null>(null);
  const remove = useAction(async (endpoint: Endpoint) => {
    await unwrap(api.DELETE("/dashboard/webhooks/{id}", { params: { path: { id: endpoint.id } } }));
    list.reload();
  });
  const enable = useAction(async (endpoint: Endpoint) => {
    await unwrap(api.POST("/dashboard/webhooks/{id}/enable", { params: { path: { id: endpoint.id } } }));
    list.reload();
  });

  useEffect(() => {
    if (fresh) freshHeading.current?.focus();
  }, [fresh]);
  useEffect(() => {
    setFresh(null);
    setOpen(null);
  }, [projectId]);

  return (
    <section aria-labelledby="webhooks-title" class="keys-page">
      <h2 id="webhooks-title">Webhooks</h2>
      <p class="hint">
        Events are POSTed as JSON, signed per <a href="https://www.standardwebhooks.com/">Standard Webhooks</a> (
        <code>webhook-id</code>, <code>webhook-timestamp</code>, <code>webhook-signature</code>), and retried with
        backoff for a day. An endpoint failing for a day is disabled.
      </p>
      <form
        class="inline-form"
        aria-label="Register a webhook endpoint"
        onSubmit={(e) => {
          e.preventDefault();
          void create.run();
        }}
      >
        <label class="field">
          <span>Endpoint URL</span>
          <input
            name="webhook-url"
            type="url"
            autoComplete="off"
            value={url}
            required
            maxLength={2000}
            placeholder="https://example.com/webhooks/memory"
            aria-describedby="webhook-url-hint"
            onInput={(e) => setUrl(e.currentTarget.value)}
          />
          <span id="webhook-url-hint" class="hint">
            A public <code>https://</code> URL. A receiver on your own machine (<code>http://localhost…</code>) needs{" "}
            <code>WEBHOOKS_ALLOW_HTTP=true</code> on the server (development only).
          </span>
        </label>
        <fieldset class="field">
          <legend>Events</legend>
          {EVENT_TYPES.map((t) => (
            <label key={t}>
              <input
                type="checkbox"
                checked={types.includes(t)}
                onChange={(e) => setTypes(e.currentTarget.checked ? [...types, t] : types.filter((x) => x !== t))}
              />{" "}
              <code>{t}</code>
            </label>
          ))}
        </fieldset>
        <button type="submit" class="primary" disabled={create.pending || types.length === 0}>
          {create.pending ? "Registering…" : "Register endpoint"}
        </button>
      </form>
      <ErrorMessage error={create.error} />

      {fresh && (
        <section class="card keys-fresh" aria-labelledby="webhooks-fresh-title">
          <h3 id="webhooks-fresh-title" ref={freshHeading} tabIndex={-1}>
            Signing secret for {fresh.url}
          </h3>
          <div class="keys-fresh-row">
            <output aria-label="Signing secret" class="mono keys-fresh-key">
              {fresh.secret}
            </output>
            <CopyButton text={fresh.secret} label="Copy secret" />
          </div>
          <p class="keys-fresh-note">
            <strong>Copy it now: it will not be shown again.</strong> Verify each request with it (any Standard Webhooks
            library). If it is lost, delete the endpoint and register it again.
          </p>
          <div class="actions">
            <button type="button" class="primary" onClick={() => setFresh(null)}>
              Done
            </button>
          </div>
        </section>
      )}

      <h3 id="webhooks-list-title" ref={listHeading} tabIndex={-1}>
        Endpoints
      </h3>
      <ErrorMessage error={remove.error ?? enable.error} />
      <Progress active={list.loading} label="Loading webhooks" />
      <ErrorMessage error={list.error} />
      {list.data && list.data.endpoints.length === 0 && <Empty>No endpoints yet. Register one above.</Empty>}
      {list.data && list.data.endpoints.length > 0 && (
        <div class="table-wrap">
          <table aria-labelledby="webhooks-list-title">
            <thead>
              <tr>
                <th scope="col">URL</th>
                <th scope="col">Events</th>
                <th scope="col">State</th>
                <th scope="col">Last delivery</th>
                <th scope="col">Next attempt</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.data.endpoints.map((ep) => (
                <tr key={ep.id}>
                  <td class="mono">{ep.url}</td>
                  <td>{ep.eventTypes.join(", ")}</td>
                  <td>
                    {ep.disabledAt ? (
                      <>
                        <span class="badge danger">Disabled</span> <span class="hint">{ep.disabledReason}</span>
                      </>
                    ) : ep.failingSince ? (
                      <span class="badge">Failing since {formatDateTime(ep.failingSince)}</span>
                    ) : (
                      <span class="badge ok">Active</span>
                    )}
                  </td>
                  <td>
                    {ep.lastDelivery ? (
                      <>
                        <StatusBadge status={ep.lastDelivery.status} /> {ep.lastDelivery.statusCode ?? ""}{" "}
                        {ep.lastDelivery.error ?? ""} <time>{formatDateTime(ep.lastDelivery.at)}</time>
                      </>
                    ) : (
                      "none yet"
                    )}
                  </td>
                  <td>{ep.nextAttemptAt ? formatDateTime(ep.nextAttemptAt) : "—"}</td>
                  <td class="actions-cell">
                    <button type="button" onClick={() => setOpen(open === ep.id ? null : ep.id)}>
                      {open === ep.id ? "Hide deliveries" : "Deliveries"}
                    </button>{" "}
                    {ep.disabledAt && (
                      <button type="button" onClick={() => void enable.run(ep)} disabled={enable.pending}>
                        Enable
                      </button>
                    )}{" "}
                    <button type="button" class="danger" onClick={() => setDeleting(ep)}>
                      Delete<span class="visually-hidden"> {ep.url}</span>
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {open && <Deliveries endpointId={open} onReplayed={list.reload} />}

      <ConfirmDialog
        open={deleting !== null}
        title="Delete this endpoint?"
        message={`${deleting?.url ?? ""} receives nothing from now on; its deliveries are deleted with it.`}
        confirmLabel="Delete endpoint"
        pending={remove.pending}
        onConfirm={() => {
          if (deleting) void remove.run(deleting).finally(() => setDeleting(null));
        }}
        onClose={() => setDeleting(null)}
        focusAfterConfirm={listHeading}
      />
    </section>
  );
}

function Deliveries({ endpointId, onReplayed }: { endpointId: string; onReplayed: () => void }) {
  const list = useLoad(
    () =>
      unwrap(
        api.GET("/dashboard/webhooks/{id}/deliveries", {
          params: { path: { id: endpointId }, query: { limit: 20, offset: 0 } },
        }),
      ),
    [endpointId],
  );
  const replay = useAction(async (id: string) => {
    await unwrap(api.POST("/dashboard/webhooks/deliveries/{id}/replay", { params: { path: { id } } }));
    list.reload();
    onReplayed();
  });
  return (
    <section aria-labelledby="webhook-deliveries-title">
      <h3 id="webhook-deliveries-title">Deliveries</h3>
      <Progress active={list.loading} label="Loading deliveries" />
      <ErrorMessage error={list.error ?? replay.error} />
      {list.data && list.data.deliveries.length === 0 && <Empty>No deliveries yet.</Empty>}
      {list.data && list.data.deliveries.length > 0 && (
        <div class="table-wrap">
          <table aria-labelledby="webhook-deliveries-title">
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">Status</th>
                <th scope="col">Attempts</th>
                <th scope="col">Next attempt</th>
                <th scope="col">Created</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.data.deliveries.map((d) => (
                <tr key={d.id}>
                  <td>
                    <code>{d.eventType}</code> <span class="mono hint">{d.id}</span>
                  </td>
                  <td>
                    <StatusBadge status={d.status} />
                  </td>
                  <td>
                    <details>
                      <summary>
                        {d.attempts} {d.lastError ? `(last: ${d.lastError})` : (d.lastStatusCode ?? "")}
                      </summary>
                      <ul>
                        {d.attemptLog.map((a) => (
                          <li key={a.at}>
                            {formatDateTime(a.at)}: {a.statusCode ?? "no answer"} {a.error ?? ""} ({a.durationMs} ms)
                          </li>
                        ))}
                      </ul>
                    </details>
                  </td>
                  <td>{d.nextAttemptAt ? formatDateTime(d.nextAttemptAt) : "—"}</td>
                  <td>{formatDateTime(d.createdAt)}</td>
                  <td class="actions-cell">
                    <button type="button" disabled={replay.pending} onClick={() => void replay.run(d.id)}>
                      Replay<span class="visually-hidden"> {d.id}</span>
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
