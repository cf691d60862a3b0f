import { useEffect, useRef, useState } from "preact/hooks";
import { api, type Schemas, unwrap } from "../api/client";
import { ConfirmDialog } from "../components/confirm";
import { CopyButton } from "../components/copy-button";
import { Empty, ErrorMessage, Pager, Progress } from "../components/status";
import { formatDateTime } from "../lib/format";
import { useAction, useLoad } from "../lib/use-load";
import "./keys.css";

const PAGE = 20;

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
  const [offset, setOffset] = useState(0);
  const list = useLoad(
    () => unwrap(api.GET("/dashboard/api-keys", { params: { query: { projectId, limit: PAGE, offset } } })),
    [projectId, offset],
  );

  const [name, setName] = useState("");
  const [fresh, setFresh] = useState<{ key: string; name: string } | null>(null);
  const create = useAction(async () => {
    const body = await unwrap(api.POST("/dashboard/api-keys", { body: { name, projectId } }));
    setName("");
    setFresh({ key: body.key, name: body.apiKey.name });
    setOffset(0);
    list.reload();
  });

  const [revoking, setRevoking] = useState<ApiKey | null>(null);
  const listHeading = useRef<HTMLHeadingElement>(null);
  const revoke = useAction(async (key: ApiKey) => {
    await unwrap(api.DELETE("/dashboard/api-keys/{id}", { params: { path: { id: key.id } } }));
    list.reload();
  });
  const confirmRevoke = async () => {
    if (!revoking) return;
    await revoke.run(revoking);
    // Closed either way: an error is shown on the page, not behind the modal's backdrop.
    // The Revoke button goes with the key's active state: the list takes the focus once closed.
    setRevoking(null);
  };

  // The new key's panel takes focus, so a screen reader announces it and Copy is one Tab away.
  const freshHeading = useRef<HTMLHeadingElement>(null);
  const nameInput = useRef<HTMLInputElement>(null);
  useEffect(() => {
    if (fresh) freshHeading.current?.focus();
  }, [fresh]);

  // Another project: nothing of the previous one stays on screen.
  useEffect(() => {
    setFresh(null);
    setOffset(0);
  }, [projectId]);

  return (
    <section aria-labelledby="keys-title" class="keys-page">
      <h2 id="keys-title">API keys</h2>
      <p class="hint">
        Applications send a key as <code>Authorization: Bearer &lt;key&gt;</code> to reach this project's{" "}
        <code>/v1</code> API.
      </p>

      <form
        class="inline-form"
        aria-label="Create an API key"
        onSubmit={(e) => {
          e.preventDefault();
          void create.run();
        }}
      >
        <label class="field">
          <span>Key name</span>
          <input
            ref={nameInput}
            name="key-name"
            autoComplete="off"
            value={name}
            required
            maxLength={100}
            placeholder="e.g. production backend"
            onInput={(e) => setName(e.currentTarget.value)}
          />
        </label>
        <button type="submit" class="primary" disabled={create.pending}>
          {create.pending ? "Creating…" : "Create key"}
        </button>
      </form>
      <ErrorMessage error={create.error} />

      {fresh && (
        <section class="card keys-fresh" aria-labelledby="keys-fresh-title">
          <h3 id="keys-fresh-title" ref={freshHeading} tabIndex={-1}>
            New API key
          </h3>
          <p class="keys-fresh-name">
            <span class="visually-hidden">Name: </span>
            {fresh.name}
          </p>
          <div class="keys-fresh-row">
            <output aria-label="New API key" class="mono keys-fresh-key">
              {fresh.key}
            </output>
            <CopyButton text={fresh.key} label="Copy key" />
          </div>
          <p class="keys-fresh-note">
            <strong>Copy it now: it will not be shown again.</strong> Only a preview of it is kept. If it is lost,
            create a new key and revoke this one.
          </p>
          <section aria-labelledby="keys-first-call-title">
            <h4 id="keys-first-call-title" class="keys-first-call-title">
              First call
            </h4>
            <p class="hint">
              Create a thread with the new key (the answer's <code>threadId</code> is where messages go):
            </p>
            <div class="keys-fresh-row">
              <pre class="mono keys-snippet">
                <code>{firstCallSnippet(apiOrigin(), fresh.key)}</code>
              </pre>
              <CopyButton text={firstCallSnippet(apiOrigin(), fresh.key)} label="Copy command" />
            </div>
          </section>
          <div class="actions">
            <button
              type="button"
              class="primary"
              onClick={() => {
                setFresh(null);
                nameInput.current?.focus();
              }}
            >
              Done
            </button>
          </div>
        </section>
      )}

      <h3 id="keys-list-title" ref={listHeading} tabIndex={-1}>
        All keys
      </h3>
      <ErrorMessage error={revoke.error} />
      <div class="keys-list">
        <Progress active={list.loading} label="Loading API keys" />
        <ErrorMessage error={list.error} />
        {list.data && list.data.apiKeys.length === 0 && <Empty>No API keys yet. Create one above.</Empty>}
        {list.data && list.data.apiKeys.length > 0 && (
          <div class="table-wrap">
            <table aria-labelledby="keys-list-title">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">State</th>
                  <th scope="col">Key</th>
                  <th scope="col">Created</th>
                  <th scope="col">Last used</th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {list.data.apiKeys.map((k) => (
                  <tr key={k.id} class={k.revokedAt ? "keys-revoked" : undefined}>
                    <td class="keys-name">{k.name}</td>
                    <td>
                      {k.revokedAt ? (
                        <>
                          <span class="badge danger">Revoked</span>{" "}
                          <span class="keys-revoked-at">
                            <time dateTime={k.revokedAt}>{formatDateTime(k.revokedAt)}</time>
                          </span>
                        </>
                      ) : (
                        <span class="badge ok">Active</span>
                      )}
                    </td>
                    <td class="mono keys-preview">{k.keyPreview}</td>
                    <td class="keys-date">{formatDateTime(k.createdAt)}</td>
                    <td class="keys-date">{k.lastUsedAt ? formatDateTime(k.lastUsedAt) : "never"}</td>
                    <td class="actions-cell">
                      {!k.revokedAt && (
                        <button type="button" class="danger" onClick={() => setRevoking(k)}>
                          Revoke<span class="visually-hidden"> {k.name}</span>
                        </button>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </div>
      {list.data && (
        <Pager offset={offset} limit={PAGE} total={list.data.total} onChange={setOffset} label="API key pages" />
      )}

      <ConfirmDialog
        open={revoking !== null}
        title={`Revoke key ${revoking?.name ?? ""}?`}
        message="Applications using this key are refused from now on. Revoking is immediate and permanent."
        confirmLabel="Revoke key"
        pending={revoke.pending}
        onConfirm={() => void confirmRevoke()}
        onClose={() => setRevoking(null)}
        focusAfterConfirm={listHeading}
      />
    </section>
  );
}
