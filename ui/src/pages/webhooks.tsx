import { useEffect, useRef, useState } from "preact/hooks";
import { api, type Schemas, unwrap } from "../api/client";
import { Button } from "../components/button";
import { ConfirmDialog, useConfirm } from "../components/confirm";
import { CreateForm, ShownOnce, TextField } from "../components/create-form";
import { Page } from "../components/page";
import { PagedTable, usePagedList } from "../components/paged-table";
import { formatDateTime } from "../lib/format";
import { useAction } from "../lib/use-load";

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

/** The event checkboxes of the register and edit forms. */
function EventTypesField({ types, onChange }: { types: EventType[]; onChange: (types: EventType[]) => void }) {
  return (
    <fieldset class="field">
      <legend>Events</legend>
      {EVENT_TYPES.map((t) => (
        <label key={t}>
          <input
            type="checkbox"
            checked={types.includes(t)}
            onChange={(e) => onChange(e.currentTarget.checked ? [...types, t] : types.filter((x) => x !== t))}
          />{" "}
          <code>{t}</code>
        </label>
      ))}
      {/* The form's button cannot act without one: said here, not left to a silent click. */}
      {types.length === 0 && (
        <small class="field-error" role="alert">
          Tick at least one event.
        </small>
      )}
    </fieldset>
  );
}

function StatusBadge({ status }: { status: string }) {
  const tone = status === "succeeded" ? "ok" : status === "failed" ? "danger" : "";
  return <span class={`badge ${tone}`}>{status}</span>;
}

/**
 * A project's webhooks: register an endpoint (its signing secret is shown once, here), list them
 * newest first, a page at a time, with the last delivery and the next attempt, a disabled one's
 * reason, its deliveries with every attempt and a replay button. An endpoint's URL and events
 * are edited under its row; rotating its secret shows the new one once, as registering does.
 */
export function WebhooksPage({ projectId }: { projectId: string }) {
  const list = usePagedList(
    (page) =>
      unwrap(api.GET("/dashboard/webhooks", { params: { query: { projectId, ...page } } })).then((body) => ({
        rows: body.endpoints,
        total: body.total,
      })),
    [projectId],
  );
  const [url, setUrl] = useState("");
  const [types, setTypes] = useState<EventType[]>(["episode.completed"]);
  // A secret shown once: a new endpoint's, or a rotated one's (with when the one it replaced stops signing).
  const [fresh, setFresh] = useState<{
    secret: string;
    url: string;
    rotated?: { endpointId: string; previousUntil: string };
  } | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  const [editing, setEditing] = useState<string | null>(null);
  // What the last enable or edit did, for the status line under the list.
  const [notice, setNotice] = useState<string | null>(null);
  const urlInput = useRef<HTMLInputElement>(null);
  const freshHeading = useRef<HTMLHeadingElement>(null);

  const create = useAction(async () => {
    const body = await unwrap(api.POST("/dashboard/webhooks", { body: { projectId, url, eventTypes: types } }));
    setUrl("");
    setFresh({ secret: body.secret, url: body.endpoint.url });
    // Newest first: the new endpoint is on the first page.
    list.first();
  });
  // The Delete button goes with its row: the list's heading takes the focus.
  const listHeading = useRef<HTMLHeadingElement>(null);
  const remove = useConfirm(async (endpoint: Endpoint) => {
    setNotice(null);
    try {
      await unwrap(api.DELETE("/dashboard/webhooks/{id}", { params: { path: { id: endpoint.id } } }));
    } finally {
      // Refused too (404: deleted elsewhere): the list shows what is left either way.
      if (open === endpoint.id) setOpen(null);
      if (editing === endpoint.id) setEditing(null);
      list.reload();
    }
  });
  const enable = useAction(async (endpoint: Endpoint) => {
    setNotice(null);
    await unwrap(api.POST("/dashboard/webhooks/{id}/enable", { params: { path: { id: endpoint.id } } }));
    setNotice(`Endpoint ${endpoint.url} enabled.`);
    // The Enable button goes with the disabled state: the keyboard stays on the endpoint's row.
    document.getElementById(toggleId(endpoint.id))?.focus();
    list.reload();
  });
  const rotate = useConfirm(async (endpoint: Endpoint) => {
    setNotice(null);
    setFresh(null);
    try {
      const body = await unwrap(
        api.POST("/dashboard/webhooks/{id}/rotate-secret", { params: { path: { id: endpoint.id } } }),
      );
      setFresh({
        secret: body.secret,
        url: body.endpoint.url,
        rotated: { endpointId: endpoint.id, previousUntil: body.previousSecretExpiresAt },
      });
    } finally {
      list.reload();
    }
  });

  // Another project: nothing of the previous one stays on screen.
  useEffect(() => {
    setFresh(null);
    setOpen(null);
    setEditing(null);
    setNotice(null);
  }, [projectId]);

  return (
    <Page
      title="Webhooks"
      level={2}
      intro={
        <>
          Events are POSTed as JSON, signed per <a href="https://www.standardwebhooks.com/">Standard Webhooks</a> (
          <code>webhook-id</code>, <code>webhook-timestamp</code>, <code>webhook-signature</code>), and retried with
          backoff for a day. An endpoint failing for a day is disabled.
        </>
      }
    >
      <CreateForm
        label="Register a webhook endpoint"
        action={create}
        submitLabel="Register endpoint"
        pendingLabel="Registering…"
        disabled={types.length === 0}
      >
        <TextField
          label="Endpoint URL"
          hint={
            <>
              A public <code>https://</code> URL. A receiver on your own machine (<code>http://localhost…</code>) needs{" "}
              <code>WEBHOOKS_ALLOW_HTTP=true</code> on the server (development only).
            </>
          }
          inputRef={urlInput}
          name="webhook-url"
          type="url"
          autoComplete="off"
          value={url}
          required
          maxLength={2000}
          placeholder="https://example.com/webhooks/memory"
          onInput={(e) => setUrl(e.currentTarget.value)}
        />
        <EventTypesField types={types} onChange={setTypes} />
      </CreateForm>

      {fresh && (
        <ShownOnce
          title={`${fresh.rotated ? "New signing secret" : "Signing secret"} for ${fresh.url}`}
          secret={fresh.secret}
          secretLabel="Signing secret"
          copyLabel="Copy secret"
          headingRef={freshHeading}
          note={
            fresh.rotated
              ? `Each request is signed with it and with the previous secret until ${formatDateTime(fresh.rotated.previousUntil)}, then with it alone: move your receiver to it before then. If it is lost, rotate again, knowing that the previous secret then stops signing at once.`
              : "Verify each request with it (any Standard Webhooks library). If it is lost, rotate the endpoint's secret."
          }
          onDone={() => {
            const rotated = fresh.rotated;
            setFresh(null);
            // Back where it was asked for: the form, or the endpoint's Rotate button.
            if (rotated) document.getElementById(rotateId(rotated.endpointId))?.focus();
            else urlInput.current?.focus();
          }}
        />
      )}

      <PagedTable
        title="Endpoints"
        headingLevel={3}
        headingRef={listHeading}
        list={list}
        error={remove.error ?? enable.error ?? rotate.error}
        loadingLabel="Loading webhooks"
        pagerLabel="Endpoint pages"
        empty="No endpoints yet. Register one above."
        rowKey={(ep) => ep.id}
        columns={[
          { header: "URL", class: "mono", cell: (ep) => ep.url },
          { header: "Events", cell: (ep) => ep.eventTypes.join(", ") },
          {
            header: "State",
            cell: (ep) =>
              ep.disabledAt ? (
                <>
                  <span class="badge danger">Disabled</span> <span class="hint">{ep.disabledReason}</span>
                </>
              ) : ep.failingSince ? (
                <span class="badge">Failing since {formatDateTime(ep.failingSince)}</span>
              ) : (
                <span class="badge ok">Active</span>
              ),
          },
          {
            header: "Last delivery",
            cell: (ep) =>
              ep.lastDelivery ? (
                <>
                  <StatusBadge status={ep.lastDelivery.status} /> {ep.lastDelivery.statusCode ?? ""}{" "}
                  {ep.lastDelivery.error ?? ""} <time>{formatDateTime(ep.lastDelivery.at)}</time>
                </>
              ) : (
                "none yet"
              ),
          },
          { header: "Next attempt", cell: (ep) => (ep.nextAttemptAt ? formatDateTime(ep.nextAttemptAt) : "—") },
        ]}
        actions={(ep) => (
          <>
            <button
              type="button"
              id={toggleId(ep.id)}
              aria-expanded={open === ep.id}
              aria-controls={open === ep.id ? panelId(ep.id) : undefined}
              onClick={() => setOpen(open === ep.id ? null : ep.id)}
            >
              {open === ep.id ? "Hide deliveries" : "Deliveries"}
              <span class="visually-hidden"> of {ep.url}</span>
            </button>{" "}
            <button
              type="button"
              id={editToggleId(ep.id)}
              aria-expanded={editing === ep.id}
              aria-controls={editing === ep.id ? editId(ep.id) : undefined}
              onClick={() => {
                setNotice(null);
                setEditing(editing === ep.id ? null : ep.id);
              }}
            >
              {editing === ep.id ? "Cancel edit" : "Edit"}
              <span class="visually-hidden"> {ep.url}</span>
            </button>{" "}
            {ep.disabledAt && (
              <Button onClick={() => void enable.run(ep)} disabled={enable.pending}>
                Enable<span class="visually-hidden"> {ep.url}</span>
              </Button>
            )}{" "}
            <button type="button" id={rotateId(ep.id)} onClick={() => rotate.ask(ep)}>
              Rotate secret<span class="visually-hidden"> of {ep.url}</span>
            </button>{" "}
            <button type="button" class="danger" onClick={() => remove.ask(ep)}>
              Delete<span class="visually-hidden"> {ep.url}</span>
            </button>
          </>
        )}
        detail={(ep) =>
          (editing === ep.id || open === ep.id) && (
            <>
              {editing === ep.id && (
                <EditEndpoint
                  endpoint={ep}
                  onSaved={(saved) => {
                    setEditing(null);
                    setNotice(`Endpoint ${saved.url} saved.`);
                    // The form goes: the keyboard goes back to the Edit button that opened it.
                    document.getElementById(editToggleId(ep.id))?.focus();
                    list.reload();
                  }}
                />
              )}
              {open === ep.id && <Deliveries endpointId={ep.id} onReplayed={list.reload} />}
            </>
          )
        }
      />
      <p role="status" class="create-status">
        {notice && !enable.pending && !enable.error ? notice : ""}
      </p>

      <ConfirmDialog
        {...rotate.dialog}
        title="Rotate this endpoint's secret?"
        message={`${rotate.target?.url ?? ""} gets a new signing secret, shown once. For 24 hours each request is signed with the new secret and the current one, so its receiver can switch when ready; then with the new one alone. A secret replaced less than 24 hours ago stops signing now.`}
        confirmLabel="Rotate secret"
        focusAfterConfirm={freshHeading}
      />

      <ConfirmDialog
        {...remove.dialog}
        title="Delete this endpoint?"
        message={`${remove.target?.url ?? ""} receives nothing from now on; its deliveries are deleted with it.`}
        confirmLabel="Delete endpoint"
        focusAfterConfirm={listHeading}
      />
    </Page>
  );
}

/** Time for a replayed delivery's attempt to run before its list is read again (it runs in the background). */
const REPLAY_SETTLE_MS = 2000;

const toggleId = (endpointId: string) => `deliveries-toggle-${endpointId}`;
const panelId = (endpointId: string) => `deliveries-${endpointId}`;
const editToggleId = (endpointId: string) => `edit-toggle-${endpointId}`;
const editId = (endpointId: string) => `edit-${endpointId}`;
const rotateId = (endpointId: string) => `rotate-${endpointId}`;

/**
 * An endpoint's URL and events, edited under its row and saved with one PATCH (checked as at
 * registration: a refusal is shown under the form, which stays open). Its deliveries and their
 * history stay; a pending one goes to the new URL at its next attempt.
 */
function EditEndpoint({ endpoint, onSaved }: { endpoint: Endpoint; onSaved: (saved: Endpoint) => void }) {
  const [url, setUrl] = useState(endpoint.url);
  const [types, setTypes] = useState<EventType[]>(EVENT_TYPES.filter((t) => endpoint.eventTypes.includes(t)));
  const urlInput = useRef<HTMLInputElement>(null);
  // Opened from its row's Edit button: the keyboard goes to the first field.
  useEffect(() => {
    urlInput.current?.focus();
  }, []);
  const save = useAction(async () => {
    const body = await unwrap(
      api.PATCH("/dashboard/webhooks/{id}", {
        params: { path: { id: endpoint.id } },
        // The URL only when it changed: an endpoint registered under a policy since tightened
        // (WEBHOOKS_ALLOW_HTTP turned off) can still have its events changed.
        body: url === endpoint.url ? { eventTypes: types } : { url, eventTypes: types },
      }),
    );
    onSaved(body.endpoint);
  });
  return (
    <section id={editId(endpoint.id)} class="row-form" aria-label={`Edit ${endpoint.url}`}>
      <CreateForm
        label={`Edit ${endpoint.url}`}
        action={save}
        submitLabel="Save endpoint"
        pendingLabel="Saving…"
        disabled={types.length === 0}
      >
        <TextField
          label="URL"
          hint="Pending deliveries go to the new URL at their next attempt; the delivery history stays."
          inputRef={urlInput}
          name="webhook-edit-url"
          type="url"
          autoComplete="off"
          value={url}
          required
          maxLength={2000}
          onInput={(e) => setUrl(e.currentTarget.value)}
        />
        <EventTypesField types={types} onChange={setTypes} />
      </CreateForm>
    </section>
  );
}

/** An endpoint's deliveries, newest first, a page at a time, each with its attempts and a replay. */
function Deliveries({ endpointId, onReplayed }: { endpointId: string; onReplayed: () => void }) {
  const list = usePagedList(
    (page) =>
      unwrap(
        api.GET("/dashboard/webhooks/{id}/deliveries", { params: { path: { id: endpointId }, query: page } }),
      ).then((body) => ({ rows: body.deliveries, total: body.total })),
    [endpointId],
  );
  const [replayed, setReplayed] = useState<{ id: string } | null>(null);
  const replay = useAction(async (id: string) => {
    setReplayed(null);
    await unwrap(api.POST("/dashboard/webhooks/deliveries/{id}/replay", { params: { path: { id } } }));
    setReplayed({ id });
    list.reload();
    onReplayed();
  });
  // The replayed attempt runs in the background, just after the answer: read the list again
  // once it has had the time to, so the new attempt shows without a reload by hand.
  useEffect(() => {
    if (!replayed) return;
    const timer = setTimeout(() => {
      list.reload();
      onReplayed();
    }, REPLAY_SETTLE_MS);
    return () => clearTimeout(timer);
  }, [replayed]);
  return (
    <section id={panelId(endpointId)} aria-label="Deliveries">
      <PagedTable
        title="Deliveries"
        headingLevel={3}
        list={list}
        error={replay.error}
        loadingLabel="Loading deliveries"
        pagerLabel="Delivery pages"
        empty="No deliveries yet."
        rowKey={(d) => d.id}
        columns={[
          {
            header: "Event",
            cell: (d) => (
              <>
                <code>{d.eventType}</code> <span class="mono hint">{d.id}</span>
              </>
            ),
          },
          { header: "Status", cell: (d) => <StatusBadge status={d.status} /> },
          {
            header: "Attempts",
            cell: (d) => (
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
            ),
          },
          { header: "Next attempt", cell: (d) => (d.nextAttemptAt ? formatDateTime(d.nextAttemptAt) : "—") },
          { header: "Created", cell: (d) => formatDateTime(d.createdAt) },
        ]}
        actions={(d) => (
          <Button disabled={replay.pending} onClick={() => void replay.run(d.id)}>
            Replay<span class="visually-hidden"> {d.id}</span>
          </Button>
        )}
      />
      <p role="status" class="create-status">
        {replayed && !replay.pending && !replay.error ? `Replayed: delivery ${replayed.id} queued.` : ""}
      </p>
    </section>
  );
}
