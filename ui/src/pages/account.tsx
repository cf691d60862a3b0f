import { useState } from "preact/hooks";
import { ApiError, api, unwrap } from "../api/client";
import type { Me } from "../app";
import { ErrorMessage } from "../components/status";
import { useAction } from "../lib/use-load";
import "./account.css";

/**
 * The signed-in user's own account: change the password, proving the current one. The server
 * signs out the user's other sessions; this one stays signed in.
 */
export function AccountPage({ me }: { me: Me }) {
  const [current, setCurrent] = useState("");
  const [next, setNext] = useState("");
  const [repeat, setRepeat] = useState("");
  const [done, setDone] = useState<string | null>(null);
  const change = useAction(async () => {
    setDone(null);
    // Said here rather than sent: the server never sees the repeated field.
    if (next !== repeat) throw new ApiError(400, "The new passwords do not match");
    const body = await unwrap(api.POST("/auth/password", { body: { currentPassword: current, newPassword: next } }));
    setCurrent("");
    setNext("");
    setRepeat("");
    const others = body.sessionsRevoked;
    setDone(
      `Password changed.${others > 0 ? ` ${others} other session${others === 1 ? " was" : "s were"} signed out.` : ""}`,
    );
  });

  return (
    <section aria-labelledby="account-title" class="account-page">
      <h1 id="account-title">Account</h1>
      <p class="hint">
        Signed in as <strong>{me.username}</strong>.
      </p>

      <h2 id="account-password-title">Change your password</h2>
      <form
        class="account-form"
        aria-labelledby="account-password-title"
        onSubmit={(e) => {
          e.preventDefault();
          void change.run();
        }}
      >
        <div class="field">
          <label for="account-current">Current password</label>
          <input
            id="account-current"
            name="current-password"
            type="password"
            autoComplete="current-password"
            value={current}
            required
            maxLength={200}
            onInput={(e) => setCurrent(e.currentTarget.value)}
          />
        </div>
        <div class="field">
          <label for="account-new">New password</label>
          <input
            id="account-new"
            name="new-password"
            type="password"
            autoComplete="new-password"
            value={next}
            required
            minLength={6}
            maxLength={200}
            aria-describedby="account-new-hint"
            onInput={(e) => setNext(e.currentTarget.value)}
          />
          <small id="account-new-hint">6–200 characters</small>
        </div>
        <div class="field">
          <label for="account-repeat">Repeat the new password</label>
          <input
            id="account-repeat"
            name="repeat-password"
            type="password"
            autoComplete="new-password"
            value={repeat}
            required
            minLength={6}
            maxLength={200}
            onInput={(e) => setRepeat(e.currentTarget.value)}
          />
        </div>
        <button type="submit" class="primary" disabled={change.pending}>
          {change.pending ? "Changing…" : "Change password"}
        </button>
      </form>
      <ErrorMessage error={change.error} />
      <p role="status" class="account-status">
        {done && !change.pending && !change.error ? done : ""}
      </p>
    </section>
  );
}
