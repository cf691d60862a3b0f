import { useRef, useState } from "preact/hooks";
import { api, type Schemas, unwrap } from "../api/client";
import type { Me } from "../app";
import { ConfirmDialog, useConfirm } from "../components/confirm";
import { CreateForm, TextField } from "../components/create-form";
import { Page } from "../components/page";
import { PagedTable, usePagedList } from "../components/paged-table";
import { formatDateTime } from "../lib/format";
import { href } from "../lib/router";
import { useAction } from "../lib/use-load";
import "./users.css";

type User = Schemas["DashboardUser"];

/**
 * Dashboard users: every operator sees and manages every user. The server refuses deleting
 * yourself and the last user; the page says so before asking (the server still decides).
 */
export function UsersPage({ me }: { me: Me }) {
  const list = usePagedList(
    (page) =>
      unwrap(api.GET("/dashboard/users", { params: { query: page } })).then((body) => ({
        rows: body.users,
        total: body.total,
      })),
    [],
  );

  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [created, setCreated] = useState<string | null>(null);

  // The row (and its button) goes: the list's heading takes the focus.
  const listHeading = useRef<HTMLHeadingElement>(null);
  const remove = useConfirm(
    async (user: User) => {
      setCreated(null);
      try {
        await unwrap(api.DELETE("/dashboard/users/{id}", { params: { path: { id: user.id } } }));
      } finally {
        // Refused too (404: deleted in another tab): the list shows who is left either way.
        list.reload();
      }
    },
    {
      // The spec's refusals, said before the confirmation rather than after it.
      refuse: (user) =>
        user.id === me.userId
          ? "You cannot delete your own account"
          : list.total !== undefined && list.total <= 1
            ? "Cannot delete the last user"
            : undefined,
    },
  );

  const create = useAction(async () => {
    setCreated(null);
    remove.clearError();
    const body = await unwrap(api.POST("/dashboard/users", { body: { username, password } }));
    setUsername("");
    setPassword("");
    setCreated(body.user.username);
    // Newest first: the new user is on the first page.
    list.first();
  });

  return (
    <Page
      title="Users"
      intro={
        <>
          Dashboard operators. Every user can see and manage every project.{" "}
          <a href={href("account")}>Change your password</a>
        </>
      }
    >
      <CreateForm
        label="Add a user"
        headingLevel={2}
        class="users-form"
        action={create}
        submitLabel="Create user"
        status={created && !create.pending && !create.error ? `User ${created} created.` : null}
      >
        <TextField
          label="Username"
          hint="1–100 characters"
          name="new-username"
          autoComplete="off"
          value={username}
          required
          minLength={1}
          maxLength={100}
          onInput={(e) => setUsername(e.currentTarget.value)}
        />
        <TextField
          label="Password"
          hint="6–200 characters"
          name="new-password"
          type="password"
          autoComplete="new-password"
          value={password}
          required
          minLength={6}
          maxLength={200}
          onInput={(e) => setPassword(e.currentTarget.value)}
        />
      </CreateForm>

      <PagedTable
        title="All users"
        headingLevel={2}
        headingRef={listHeading}
        list={list}
        error={remove.error}
        loadingLabel="Loading users"
        pagerLabel="User pages"
        empty="No users."
        rowKey={(u) => u.id}
        columns={[
          {
            header: "Username",
            cell: (u) => (
              <>
                <span class="users-name">{u.username}</span>
                {u.id === me.userId && (
                  <>
                    {" "}
                    <span class="badge ok">you</span>
                  </>
                )}
              </>
            ),
          },
          { header: "Created", class: "users-date", cell: (u) => formatDateTime(u.createdAt) },
          {
            header: "Updated",
            headerClass: "users-updated",
            class: "users-date users-updated",
            cell: (u) => formatDateTime(u.updatedAt),
          },
        ]}
        actions={(u) => (
          <button type="button" class="danger" onClick={() => remove.ask(u)}>
            Delete<span class="visually-hidden"> {u.username}</span>
          </button>
        )}
      />

      <ConfirmDialog
        {...remove.dialog}
        title={`Delete user ${remove.target?.username ?? ""}?`}
        message="They are signed out everywhere and can no longer sign in. This cannot be undone."
        confirmLabel="Delete user"
        focusAfterConfirm={listHeading}
      />
    </Page>
  );
}
