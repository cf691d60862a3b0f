import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, api, type Schemas, unwrap } from "../api/client";
import type { Me } from "../app";
import { ConfirmDialog } from "../components/confirm";
import { Empty, ErrorMessage, Pager, Progress } from "../components/status";
import { formatDateTime } from "../lib/format";
import { href } from "../lib/router";
import { useAction, useLoad } from "../lib/use-load";
import "./users.css";

const PAGE = 20;

type User = Schemas["DashboardUser"];

/**
 * Dashboard users: every operator sees and manages every user. The server refuses deleting
 * yourself and the last user; the page says so before asking (the server still decides).
 */
export function UsersPage({ me }: { me: Me }) {
  const [offset, setOffset] = useState(0);
  const list = useLoad(
    () => unwrap(api.GET("/dashboard/users", { params: { query: { limit: PAGE, offset } } })),
    [offset],
  );

  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [created, setCreated] = useState<string | null>(null);
  const [refusal, setRefusal] = useState<ApiError>();
  const create = useAction(async () => {
    setCreated(null);
    setRefusal(undefined);
    const body = await unwrap(api.POST("/dashboard/users", { body: { username, password } }));
    setUsername("");
    setPassword("");
    setCreated(body.user.username);
    list.reload();
  });

  const [deleting, setDeleting] = useState<User | null>(null);
  const listHeading = useRef<HTMLHeadingElement>(null);
  const remove = useAction(async (user: User) => {
    await unwrap(api.DELETE("/dashboard/users/{id}", { params: { path: { id: user.id } } }));
    setCreated(null);
    list.reload();
  });
  const askDelete = (user: User) => {
    remove.clearError();
    // The spec's refusals, said before the confirmation rather than after it.
    if (user.id === me.userId) setRefusal(new ApiError(400, "You cannot delete your own account"));
    else if (list.data && list.data.total <= 1) setRefusal(new ApiError(400, "Cannot delete the last user"));
    else {
      setRefusal(undefined);
      setDeleting(user);
    }
  };
  const confirmDelete = async () => {
    if (!deleting) return;
    await remove.run(deleting);
    // Closed either way: a refusal is shown on the page, not behind the modal's backdrop.
    // The row (and its button) goes: the list takes the focus once closed.
    setDeleting(null);
  };

  // Deleting the last user of a page goes back one page.
  const users = list.data?.users;
  useEffect(() => {
    if (users && users.length === 0 && offset > 0) setOffset(Math.max(0, offset - PAGE));
  }, [users, offset]);

  return (
    <section aria-labelledby="users-title" class="users-page">
      <h1 id="users-title">Users</h1>
      <p class="hint">
        Dashboard operators. Every user can see and manage every project.{" "}
        <a href={href("account")}>Change your password</a>
      </p>

      <h2 id="users-create-title">Add a user</h2>
      <form
        class="inline-form users-form"
        aria-labelledby="users-create-title"
        onSubmit={(e) => {
          e.preventDefault();
          void create.run();
        }}
      >
        <div class="field">
          <label for="users-username">Username</label>
          <input
            id="users-username"
            name="new-username"
            autoComplete="off"
            value={username}
            required
            minLength={1}
            maxLength={100}
            aria-describedby="users-username-hint"
            onInput={(e) => setUsername(e.currentTarget.value)}
          />
          <small id="users-username-hint">1–100 characters</small>
        </div>
        <div class="field">
          <label for="users-password">Password</label>
          <input
            id="users-password"
            name="new-password"
            type="password"
            autoComplete="new-password"
            value={password}
            required
            minLength={6}
            maxLength={200}
            aria-describedby="users-password-hint"
            onInput={(e) => setPassword(e.currentTarget.value)}
          />
          <small id="users-password-hint">6–200 characters</small>
        </div>
        <button type="submit" class="primary" disabled={create.pending}>
          {create.pending ? "Creating…" : "Create user"}
        </button>
      </form>
      <ErrorMessage error={create.error} />
      <p role="status" class="users-status">
        {created && !create.pending && !create.error ? `User ${created} created.` : ""}
      </p>

      <h2 id="users-list-title" ref={listHeading} tabIndex={-1}>
        All users
      </h2>
      <ErrorMessage error={refusal ?? remove.error} />
      <div class="users-list">
        <Progress active={list.loading} label="Loading users" />
        <ErrorMessage error={list.error} />
        {list.data && list.data.users.length === 0 && <Empty>No users.</Empty>}
        {list.data && list.data.users.length > 0 && (
          <div class="table-wrap">
            <table aria-labelledby="users-list-title">
              <thead>
                <tr>
                  <th scope="col">Username</th>
                  <th scope="col">Created</th>
                  <th scope="col" class="users-updated">
                    Updated
                  </th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {list.data.users.map((u) => (
                  <tr key={u.id}>
                    <td>
                      <span class="users-name">{u.username}</span>
                      {u.id === me.userId && (
                        <>
                          {" "}
                          <span class="badge ok">you</span>
                        </>
                      )}
                    </td>
                    <td class="users-date">{formatDateTime(u.createdAt)}</td>
                    <td class="users-date users-updated">{formatDateTime(u.updatedAt)}</td>
                    <td class="actions-cell">
                      <button type="button" class="danger" onClick={() => askDelete(u)}>
                        Delete<span class="visually-hidden"> {u.username}</span>
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </div>
      {list.data && (
        <Pager offset={offset} limit={PAGE} total={list.data.total} onChange={setOffset} label="User pages" />
      )}

      <ConfirmDialog
        open={deleting !== null}
        title={`Delete user ${deleting?.username ?? ""}?`}
        message="They are signed out everywhere and can no longer sign in. This cannot be undone."
        confirmLabel="Delete user"
        pending={remove.pending}
        onConfirm={() => void confirmDelete()}
        onClose={() => setDeleting(null)}
        focusAfterConfirm={listHeading}
      />
    </section>
  );
}
