import { useEffect, useState } from "preact/hooks";
import { api, SESSION_ENDED, session, unwrap } from "./api/client";
import { afterSignIn, href, navigate, parseHash, useRoute } from "./lib/router";
import { AccountPage } from "./pages/account";
import { ProjectPage } from "./pages/project";
import { ProjectsPage } from "./pages/projects";
import { SignInPage } from "./pages/sign-in";
import { UsersPage } from "./pages/users";

export interface Me {
  userId: string;
  username: string;
}

export function App() {
  const route = useRoute();
  const [me, setMe] = useState<Me | null | undefined>(session.token ? undefined : null);

  // A session the server refuses (expired, revoked, user deleted) returns to sign-in with the
  // reason, and signing in again returns to the page it ended on.
  useEffect(() => {
    const ended = (e: Event) => {
      setMe(null);
      // A second refused call finds sign-in already shown: it keeps the page found by the first.
      const here = parseHash(location.hash);
      const next = here.parts[0] === "sign-in" ? here.query.get("next") : location.hash;
      navigate(href("sign-in", { reason: (e as CustomEvent<string>).detail, next }), { replace: true });
    };
    window.addEventListener(SESSION_ENDED, ended);
    return () => window.removeEventListener(SESSION_ENDED, ended);
  }, []);

  useEffect(() => {
    if (me !== undefined) return;
    unwrap(api.GET("/auth/me")).then(
      (body) => setMe(body.user),
      () => setMe(null),
    );
  }, [me]);

  if (me === undefined) return <div class="boot" aria-busy="true" />;
  if (me === null || route.parts[0] === "sign-in") {
    return (
      <SignInPage
        reason={route.query.get("reason")}
        onSignedIn={(user) => {
          setMe(user);
          // Where the session ended, or the page asked for (a link opened while signed out).
          navigate(afterSignIn(route.parts[0] === "sign-in" ? route.query.get("next") : location.hash), {
            replace: true,
          });
        }}
      />
    );
  }

  const signOut = async () => {
    await api.POST("/auth/logout").catch(() => undefined);
    session.clear();
    setMe(null);
    navigate(href("sign-in", { reason: "You signed out." }), { replace: true });
  };

  const [section = "projects", id, ...rest] = route.parts;
  return (
    <>
      {/* A button, not a link: a `#main` href would replace the hash route. */}
      <button type="button" class="skip-link" onClick={focusMain}>
        Skip to content
      </button>
      <header class="top">
        <a class="brand" href={href("projects")}>
          Memory
        </a>
        <nav aria-label="Main">
          <a href={href("projects")} aria-current={section === "projects" ? "page" : undefined}>
            Projects
          </a>
          <a href={href("users")} aria-current={section === "users" ? "page" : undefined}>
            Users
          </a>
        </nav>
        <a class="who" href={href("account")} aria-current={section === "account" ? "page" : undefined}>
          {me.username}
        </a>
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      <ProviderBanner />
      <main id="main" tabIndex={-1}>
        {section === "users" ? (
          <UsersPage me={me} />
        ) : section === "account" ? (
          <AccountPage me={me} />
        ) : section === "projects" && id ? (
          <ProjectPage projectId={id} parts={rest} query={route.query} />
        ) : (
          <ProjectsPage />
        )}
      </main>
    </>
  );
}

/**
 * Without a model provider the service stores and recalls but makes no replies, episodes or facts:
 * said once at the top of every page, so it does not look like a broken service.
 */
function ProviderBanner() {
  const [configured, setConfigured] = useState(true);
  useEffect(() => {
    unwrap(api.GET("/dashboard/provider")).then(
      (body) => setConfigured(body.provider.configured),
      () => undefined,
    );
  }, []);
  if (configured) return null;
  return (
    <p class="notice provider-banner" role="status">
      <strong>No model provider is configured.</strong> Threads, messages and recall (by keyword) work; chat answers 500
      and episodes and fact extraction fail until the server is started with <code>OPENAI_API_KEY</code> (OpenAI) or{" "}
      <code>OPENAI_BASE_URL</code> (an OpenAI-compatible server such as Ollama, vLLM or llama.cpp server).
    </p>
  );
}

function focusMain() {
  document.getElementById("main")?.focus();
}
