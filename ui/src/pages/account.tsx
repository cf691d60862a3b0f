import { useState } from "preact/hooks";
import { ApiError, api, unwrap } from "../api/client";
import type { Me } from "../app";
import { Button } from "../components/button";
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
          if (!change.pending) void change.run();
        }}
      >
        <PasswordField id="account-current" label="Current password" value={current} onInput={setCurrent} />
        <PasswordField
          id="account-new"
          label="New password"
          value={next}
          onInput={setNext}
          hint="6–200 characters"
          isNew
        />
        <PasswordField id="account-repeat" label="Repeat the new password" value={repeat} onInput={setRepeat} isNew />
        <Button type="submit" class="primary" disabled={change.pending}>
          {change.pending ? "Changing…" : "Change password"}
        </Button>
      </form>
      <ErrorMessage error={change.error} />
      <p role="status" class="account-status">
        {done && !change.pending && !change.error ? done : ""}
      </p>
    </section>
  );
}

/** A labelled password input; a new password has the server's length rule (6-200). */
function PasswordField(props: {
  id: string;
  label: string;
  value: string;
  onInput: (value: string) => void;
  hint?: string;
  isNew?: boolean;
}) {
  return (
    <div class="field">
      <label for={props.id}>{props.label}</label>
      <input
        id={props.id}
        name={props.id}
        type="password"
        autoComplete={props.isNew ? "new-password" : "current-password"}
        value={props.value}
        required
        minLength={props.isNew ? 6 : undefined}
        maxLength={200}
        aria-describedby={props.hint ? `${props.id}-hint` : undefined}
        onInput={(e) => props.onInput(e.currentTarget.value)}
      />
      {props.hint && <small id={`${props.id}-hint`}>{props.hint}</small>}
    </div>
  );
}
