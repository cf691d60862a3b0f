import { createRoute, z } from "@hono/zod-openapi";
import { login, logout } from "../lib/auth";
import { PASSWORD_LENGTH, passwordInput } from "../lib/inputs";
import { changePassword } from "../lib/users";
import { requireSession } from "./middleware";
import { createRouter } from "./router";
import { ErrorSchema, errorResponses } from "./schemas/errors";
import { jsonBody, jsonResponse, security } from "./schemas/http";
import { text } from "./schemas/inputs";
import { UserSchema } from "./schemas/users";

/** A password check the throttle refused (lib/login-throttle.ts): the error body and `Retry-After`. */
const passwordThrottled = (description: string) => ({
  description,
  headers: {
    "Retry-After": { schema: { type: "integer" as const }, description: "Seconds until an attempt is allowed." },
  },
  content: { "application/json": { schema: ErrorSchema } },
});

const loginRoute = createRoute({
  method: "post",
  path: "/login",
  tags: ["Internal: auth"],
  summary: "Sign in to the dashboard",
  request: jsonBody(
    z.object({
      username: text().min(1).max(100).openapi({ description: "Dashboard username." }),
      password: z.string().min(1).max(200).openapi({ description: "Password." }),
    }),
  ),
  responses: {
    200: jsonResponse(
      z.object({
        token: z.string().openapi({ description: "Session token (7 days); shown once." }),
        user: UserSchema,
      }),
      "Signed in",
    ),
    400: errorResponses[400],
    401: jsonResponse(ErrorSchema, "Invalid username or password"),
    429: passwordThrottled(
      "Too many wrong passwords for this username (sign-ins and password changes count together): 5 are free, then each attempt waits 1 s after the last failure, doubling up to 15 minutes (docs/dashboard.md). Refused before the password is checked.",
    ),
  },
});

const meRoute = createRoute({
  method: "get",
  path: "/me",
  tags: ["Internal: auth"],
  summary: "The signed-in user",
  security: security.session,
  middleware: [requireSession] as const,
  responses: {
    200: jsonResponse(z.object({ user: z.object({ userId: z.string(), username: z.string() }) }), "The user"),
    401: errorResponses[401],
  },
});

const logoutRoute = createRoute({
  method: "post",
  path: "/logout",
  tags: ["Internal: auth"],
  summary: "Revoke the current session",
  security: security.session,
  middleware: [requireSession] as const,
  responses: { 204: { description: "Signed out" }, 401: errorResponses[401] },
});

const passwordRoute = createRoute({
  method: "post",
  path: "/password",
  tags: ["Internal: auth"],
  summary: "Change the signed-in user's password",
  description: "Requires the current password. The user's other sessions are revoked; this one stays signed in.",
  security: security.session,
  middleware: [requireSession] as const,
  request: jsonBody(
    z.object({
      currentPassword: z.string().min(1).max(200).openapi({ description: "The password the user signs in with now." }),
      newPassword: passwordInput().openapi({
        description: `The new password (${PASSWORD_LENGTH.min}-${PASSWORD_LENGTH.max} characters).`,
      }),
    }),
  ),
  responses: {
    200: jsonResponse(
      z.object({
        user: UserSchema,
        sessionsRevoked: z.number().int().openapi({ description: "The user's other sessions, now signed out." }),
      }),
      "Changed",
    ),
    400: jsonResponse(ErrorSchema, "Validation error, or the current password is incorrect"),
    401: errorResponses[401],
    409: jsonResponse(ErrorSchema, "The password was changed meanwhile by another session"),
    429: passwordThrottled(
      "Too many wrong passwords for this username: the current password counts with the name's sign-ins (POST /auth/login).",
    ),
  },
});

export const authRoutes = createRouter()
  .openapi(loginRoute, async (c) => {
    const { username, password } = c.req.valid("json");
    return c.json(await login(c.get("deps"), username, password), 200);
  })
  .openapi(meRoute, (c) => {
    const { userId, username } = c.get("session");
    return c.json({ user: { userId, username } }, 200);
  })
  .openapi(passwordRoute, async (c) => {
    const { userId, sessionId } = c.get("session");
    return c.json(await changePassword(c.get("deps"), { userId, sessionId, ...c.req.valid("json") }), 200);
  })
  .openapi(logoutRoute, async (c) => {
    await logout(c.get("deps"), c.get("session").sessionId);
    return c.body(null, 204);
  });
