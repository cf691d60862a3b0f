import { useEffect, useRef, useState } from "preact/hooks";
import { api, type Schemas, unwrap } from "../api/client";
import { ConfirmDialog, useConfirm } from "../components/confirm";
import { CopyButton } from "../components/copy-button";
import { CreateForm, ShownOnce, TextField } from "../components/create-form";
import { Page } from "../components/page";
import { PagedTable, usePagedList } from "../components/paged-table";
import { formatDateTime } from "../lib/format";
import { useAction } from "../lib/use-load";
import "./keys.css";

type ApiKey = Schemas["ApiKey"];

/** Where applications reach this server: the API base the dashboard itself calls, else the page's origin. */
const apiOrigin = () => (import.meta.env.VITE_API_BASE || window.location.origin).replace(/\/+$/, "");

/** A new key's first call, ready to paste into a shell: create a thread on this server. */
export function firstCallSnippet(origin: string, key: string): string {
  return [
    `curl -X POST ${origin}/v1/threads \\`,
    `  -H "Authorization: Bearer ${key}" \\`,
    `  -H "Content-Type: application/json" \\`,
    `  -d '{"dataset": "default"}'`,
  ].join("\n");
}

/**
 * A project's API keys: create one (its plaintext is shown once, here), list them, revoke one
 * (immediate and permanent; the row stays, marked Revoked).
 */
export function KeysPage({ projectId }: { projectId: string }) {
  const list = usePagedList(
    (page) =>
      unwrap(api.GET("/dashboard/api-keys", { params: { query: { projectId, ...page } } })).then((body) => ({
        rows: body.apiKeys,
        total: body.total,
      })),
    [projectId],
  );

  const [name, setName] = useState("");
  const [fresh, setFresh] = useState<{ key: string; name: string } | null>(null);
  const nameInput = useRef<HTMLInputElement>(null);
  const create = useAction(async () => {
    const body = await unwrap(api.POST("/dashboard/api-keys", { body: { name, projectId } }));
    setName("");
    setFresh({ key: body.key, name: body.apiKey.name });
    list.first();
  });

  // The Revoke button goes with the key's active state: the list's heading takes the focus.
  const listHeading = useRef<HTMLHeadingElement>(null);
  const revoke = useConfirm(async (key: ApiKey) => {
    await unwrap(api.DELETE("/dashboard/api-keys/{id}", { params: { path: { id: key.id } } }));
    list.reload();
  });

  // Another project: nothing of the previous one stays on screen.
  useEffect(() => {
    setFresh(null);
  }, [projectId]);

  return (
    <Page
      title="API keys"
      level={2}
      intro={
        <>
          Applications send a key as <code>Authorization: Bearer &lt;key&gt;</code> to reach this project's{" "}
          <code>/v1</code> API.
        </>
      }
    >
      <CreateForm label="Create an API key" action={create} submitLabel="Create key">
        <TextField
          label="Key name"
          inputRef={nameInput}
          name="key-name"
          autoComplete="off"
          value={name}
          required
          maxLength={100}
          placeholder="e.g. production backend"
          onInput={(e) => setName(e.currentTarget.value)}
        />
      </CreateForm>

      {fresh && (
        <ShownOnce
          title="New API key"
          name={fresh.name}
          secret={fresh.key}
          secretLabel="New API key"
          copyLabel="Copy key"
          note="Only a preview of it is kept. If it is lost, create a new key and revoke this one."
          onDone={() => {
            setFresh(null);
            nameInput.current?.focus();
          }}
        >
          <section aria-labelledby="keys-first-call-title">
            <h4 id="keys-first-call-title" class="keys-first-call-title">
              First call
            </h4>
            <p class="hint">
              Create a thread with the new key (the answer's <code>threadId</code> is where messages go):
            </p>
            <div class="shown-once-row">
              <pre class="mono keys-snippet">
                <code>{firstCallSnippet(apiOrigin(), fresh.key)}</code>
              </pre>
              <CopyButton text={firstCallSnippet(apiOrigin(), fresh.key)} label="Copy command" />
            </div>
          </section>
        </ShownOnce>
      )}

      <PagedTable
        title="All keys"
        headingLevel={3}
        headingRef={listHeading}
        list={list}
        error={revoke.error}
        loadingLabel="Loading API keys"
        pagerLabel="API key pages"
        empty="No API keys yet. Create one above."
        rowKey={(k) => k.id}
        rowClass={(k) => (k.revokedAt ? "keys-revoked" : undefined)}
        columns={[
          { header: "Name", class: "keys-name", cell: (k) => k.name },
          {
            header: "State",
            cell: (k) =>
              k.revokedAt ? (
                <>
                  <span class="badge danger">Revoked</span>{" "}
                  <span class="keys-revoked-at">
                    <time dateTime={k.revokedAt}>{formatDateTime(k.revokedAt)}</time>
                  </span>
                </>
              ) : (
                <span class="badge ok">Active</span>
              ),
          },
          { header: "Key", class: "mono keys-preview", cell: (k) => k.keyPreview },
          { header: "Created", class: "keys-date", cell: (k) => formatDateTime(k.createdAt) },
          {
            header: "Last used",
            class: "keys-date",
            cell: (k) => (k.lastUsedAt ? formatDateTime(k.lastUsedAt) : "never"),
          },
        ]}
        actions={(k) =>
          !k.revokedAt && (
            <button type="button" class="danger" onClick={() => revoke.ask(k)}>
              Revoke<span class="visually-hidden"> {k.name}</span>
            </button>
          )
        }
      />

      <ConfirmDialog
        {...revoke.dialog}
        title={`Revoke key ${revoke.target?.name ?? ""}?`}
        message="Applications using this key are refused from now on. Revoking is immediate and permanent."
        confirmLabel="Revoke key"
        focusAfterConfirm={listHeading}
      />
    </Page>
  );
}
