import createClient, { type Middleware } from "openapi-fetch";
import type { components, paths } from "./schema";

/** The server's OpenAPI components (generated from its zod schemas: `npm run ui:types`). */
export type Schemas = components["schemas"];

const TOKEN_KEY = "memory.session";

/**
 * Whether this page has a session of its own (loaded with one, or signed in since, and not
 * signed out here): a call that then finds no token means another tab signed out.
 */
let pageSignedIn = localStorage.getItem(TOKEN_KEY) !== null;

/** The session token lives in local storage (the spec's choice); one tab signing out signs out all. */
export const session = {
  get token(): string | null {
    return localStorage.getItem(TOKEN_KEY);
  },
  set(token: string) {
    localStorage.setItem(TOKEN_KEY, token);
    pageSignedIn = true;
  },
  clear() {
    localStorage.removeItem(TOKEN_KEY);
    pageSignedIn = false;
  },
};

/**
 * Fired when the server refuses the session (expired, revoked, user deleted), or another tab
 * signed out: the app returns to sign-in with the reason.
 */
export const SESSION_ENDED = "memory:session-ended";

/** Why a call found no session to send: another tab signed out (they share local storage). */
export const SIGNED_OUT_ELSEWHERE = "You were signed out (in another tab).";

const isSignIn = (request: Request) => new URL(request.url).pathname.endsWith("/auth/login");

const authenticate: Middleware = {
  onRequest({ request }) {
    if (isSignIn(request)) return request;
    const token = session.token;
    if (!token && pageSignedIn) {
      // Signed out in another tab since this page signed in: the call is not sent (the server
      // would only say "Missing or invalid Authorization header"); the session ends here with
      // the reason. A page that never had a session asks as before (its sign-in page, no reason).
      pageSignedIn = false;
      window.dispatchEvent(new CustomEvent(SESSION_ENDED, { detail: SIGNED_OUT_ELSEWHERE }));
      return new Response(JSON.stringify({ error: SIGNED_OUT_ELSEWHERE }), {
        status: 401,
        headers: { "content-type": "application/json" },
      });
    }
    if (token) request.headers.set("Authorization", `Bearer ${token}`);
    return request;
  },
  async onResponse({ request, response }) {
    if (response.status === 401 && !isSignIn(request)) {
      const body = (await response
        .clone()
        .json()
        .catch(() => ({}))) as { error?: string };
      session.clear();
      window.dispatchEvent(new CustomEvent(SESSION_ENDED, { detail: body.error ?? "Signed out" }));
    }
    return response;
  },
};

/** Typed API calls: paths, parameters and bodies are checked against the server's own schemas. */
export const api = createClient<paths>({ baseUrl: import.meta.env.VITE_API_BASE ?? "" });
api.use(authenticate);

/** A failed call, with the server's message and its validation issues (400) when there are any. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly issues: { path: (string | number)[]; message: string }[] = [],
  ) {
    super(message);
  }
}

type Result<T> = { data?: T; error?: unknown; response: Response };

/** The data of a call, or an ApiError carrying the spec's error body. */
export async function unwrap<T>(call: Promise<Result<T>>): Promise<T> {
  let result: Result<T>;
  try {
    result = await call;
  } catch {
    throw new ApiError(0, "The service cannot be reached. Check your connection and try again.");
  }
  const { data, error, response } = result;
  if (response.ok) return data as T;
  const body = (error ?? {}) as { error?: string; issues?: ApiError["issues"] };
  throw new ApiError(response.status, body.error ?? `${response.status} ${response.statusText}`, body.issues ?? []);
}
