import { useRef, useState } from "preact/hooks";
import { api, unwrap } from "../api/client";
import { ConfirmDialog } from "../components/confirm";
import { Empty, ErrorMessage, Pager, Progress } from "../components/status";
import { formatDateTime } from "../lib/format";
import { href } from "../lib/router";
import { useAction, useLoad } from "../lib/use-load";

const PAGE = 20;

export function ProjectsPage() {
  const [offset, setOffset] = useState(0);
  const list = useLoad(
    () => unwrap(api.GET("/dashboard/projects", { params: { query: { limit: PAGE, offset } } })),
    [offset],
  );
  const [name, setName] = useState("");
  const create = useAction(async () => {
    await unwrap(api.POST("/dashboard/projects", { body: { name } }));
    setName("");
    list.reload();
  });
  const [deleting, setDeleting] = useState<{ id: string; name: string } | null>(null);
  const title = useRef<HTMLHeadingElement>(null);
  const remove = useAction(async (id: string) => {
    await unwrap(api.DELETE("/dashboard/projects/{id}", { params: { path: { id } } }));
    setDeleting(null);
    list.reload();
  });

  return (
    <section aria-labelledby="projects-title">
      <h1 id="projects-title" ref={title} tabIndex={-1}>
        Projects
      </h1>
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void create.run();
        }}
      >
        <label class="field">
          <span>New project name</span>
          <input value={name} maxLength={100} required onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        <button type="submit" class="primary" disabled={create.pending}>
          {create.pending ? "Creating…" : "Create project"}
        </button>
      </form>
      <ErrorMessage error={create.error} />
      <Progress active={list.loading} label="Loading projects" />
      <ErrorMessage error={list.error ?? remove.error} />
      {list.data && list.data.projects.length === 0 && <Empty>No projects yet. Create one to get an API key.</Empty>}
      {list.data && list.data.projects.length > 0 && (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Projects</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Created</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.data.projects.map((p) => (
                <tr key={p.id}>
                  <td>
                    <a href={href("projects", p.id)}>{p.name}</a>
                  </td>
                  <td>{formatDateTime(p.createdAt)}</td>
                  <td class="actions-cell">
                    <button type="button" class="danger" onClick={() => setDeleting(p)}>
                      Delete<span class="visually-hidden"> {p.name}</span>
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {list.data && <Pager offset={offset} limit={PAGE} total={list.data.total} onChange={setOffset} />}
      <ConfirmDialog
        open={deleting !== null}
        title={`Delete project ${deleting?.name ?? ""}?`}
        message="This deletes its API keys, threads, messages, episodes, facts and entities. It cannot be undone."
        typed={deleting?.name}
        confirmLabel="Delete project"
        pending={remove.pending}
        onConfirm={() => deleting && void remove.run(deleting.id)}
        onClose={() => setDeleting(null)}
        focusAfterConfirm={title}
      />
    </section>
  );
}
