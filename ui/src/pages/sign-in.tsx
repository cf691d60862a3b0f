import { useState } from "preact/hooks";
import { api, session, unwrap } from "../api/client";
import type { Me } from "../app";
import { Button } from "../components/button";
import { ErrorMessage } from "../components/status";
import { useAction } from "../lib/use-load";

export function SignInPage({ reason, onSignedIn }: { reason: string | null; onSignedIn: (me: Me) => void }) {
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const login = useAction(async () => {
    const body = await unwrap(api.POST("/auth/login", { body: { username, password } }));
    session.set(body.token);
    onSignedIn({ userId: body.user.id, username: body.user.username });
  });
  return (
    <main id="main" class="sign-in">
      <form
        class="card"
        onSubmit={(e) => {
          e.preventDefault();
          if (!login.pending) void login.run();
        }}
      >
        <h1>Sign in</h1>
        {reason && (
          <p class="notice" role="status">
            {reason}
          </p>
        )}
        <label class="field">
          <span>Username</span>
          <input
            name="username"
            autoComplete="username"
            required
            value={username}
            onInput={(e) => setUsername(e.currentTarget.value)}
          />
        </label>
        <label class="field">
          <span>Password</span>
          <input
            name="password"
            type="password"
            autoComplete="current-password"
            required
            value={password}
            onInput={(e) => setPassword(e.currentTarget.value)}
          />
        </label>
        <ErrorMessage error={login.error} />
        <Button type="submit" class="primary" disabled={login.pending}>
          {login.pending ? "Signing in…" : "Sign in"}
        </Button>
      </form>
    </main>
  );
}
