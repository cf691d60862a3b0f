import { useRef, useState } from "preact/hooks";
import { api, type Schemas, unwrap } from "../api/client";
import { ConfirmDialog, useConfirm } from "../components/confirm";
import { CreateForm, TextField } from "../components/create-form";
import { Page } from "../components/page";
import { PagedTable, usePagedList } from "../components/paged-table";
import { formatDateTime } from "../lib/format";
import { href } from "../lib/router";
import { useAction } from "../lib/use-load";

type Project = Schemas["Project"];

/** The projects: create one, open one, delete one (typing its name: everything in it goes). */
export function ProjectsPage() {
  const list = usePagedList(
    (page) =>
      unwrap(api.GET("/dashboard/projects", { params: { query: page } })).then((body) => ({
        rows: body.projects,
        total: body.total,
      })),
    [],
  );

  const [name, setName] = useState("");
  const [created, setCreated] = useState<string | null>(null);
  const create = useAction(async () => {
    setCreated(null);
    const body = await unwrap(api.POST("/dashboard/projects", { body: { name } }));
    setName("");
    setCreated(body.project.name);
    // The new project is on the first page (newest first), wherever the list was.
    list.first();
  });

  // The row (and its button) goes: the page's heading takes the focus.
  const title = useRef<HTMLHeadingElement>(null);
  const remove = useConfirm(async (project: Project) => {
    setCreated(null);
    try {
      await unwrap(api.DELETE("/dashboard/projects/{id}", { params: { path: { id: project.id } } }));
    } finally {
      // Refused too (404: deleted in another tab): the list shows what is left either way.
      list.reload();
    }
  });

  return (
    <Page title="Projects" headingRef={title}>
      <CreateForm
        label="Create a project"
        action={create}
        submitLabel="Create project"
        status={created && !create.pending && !create.error ? `Project ${created} created.` : null}
      >
        <TextField
          label="New project name"
          name="project-name"
          autoComplete="off"
          value={name}
          maxLength={100}
          required
          onInput={(e) => setName(e.currentTarget.value)}
        />
      </CreateForm>

      <PagedTable
        title="Projects"
        list={list}
        error={remove.error}
        loadingLabel="Loading projects"
        pagerLabel="Project pages"
        empty="No projects yet. Create one to get an API key."
        rowKey={(p) => p.id}
        columns={[
          { header: "Name", cell: (p) => <a href={href("projects", p.id)}>{p.name}</a> },
          { header: "Created", cell: (p) => formatDateTime(p.createdAt) },
        ]}
        actions={(p) => (
          <button type="button" class="danger" onClick={() => remove.ask(p)}>
            Delete<span class="visually-hidden"> {p.name}</span>
          </button>
        )}
      />

      <ConfirmDialog
        {...remove.dialog}
        title={`Delete project ${remove.target?.name ?? ""}?`}
        message="This deletes its API keys, threads, messages, episodes, facts and entities. It cannot be undone."
        typed={remove.target?.name}
        confirmLabel="Delete project"
        focusAfterConfirm={title}
      />
    </Page>
  );
}
