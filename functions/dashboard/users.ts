import { createRoute, z } from "@hono/zod-openapi";
import { PASSWORD_LENGTH, passwordInput } from "../../lib/inputs";
import { createUser, deleteUser, listUsers } from "../../lib/users";
import { operation } from "../router";
import { ErrorSchema, errorResponses } from "../schemas/errors";
import { jsonBody, jsonResponse, security } from "../schemas/http";
import { pageQuery, pathParams, text } from "../schemas/inputs";
import { UserSchema } from "../schemas/users";

/** `/dashboard/users`: who may sign in to the dashboard. */
const base = { tags: ["Internal: dashboard"], security: security.session };
const idParam = pathParams("id");

export const userOperations = {
  list: operation(
    createRoute({
      ...base,
      method: "get",
      path: "/users",
      summary: "List dashboard users, newest first",
      request: { query: z.object(pageQuery) },
      responses: {
        200: jsonResponse(z.object({ users: z.array(UserSchema), total: z.number().int() }), "Users, newest first"),
        400: errorResponses[400],
        401: errorResponses[401],
      },
    }),
    async (c) => c.json(await listUsers(c.get("deps"), c.req.valid("query")), 200),
  ),
  create: operation(
    createRoute({
      ...base,
      method: "post",
      path: "/users",
      summary: "Create a dashboard user",
      request: jsonBody(
        z.object({
          username: text()
            .trim()
            .min(1)
            .max(100)
            .openapi({ description: "1-100 characters, without the spaces around them (trimmed)." }),
          password: passwordInput().openapi({
            description: `${PASSWORD_LENGTH.min}-${PASSWORD_LENGTH.max} characters.`,
          }),
        }),
      ),
      responses: {
        201: jsonResponse(z.object({ user: UserSchema }), "Created"),
        400: errorResponses[400],
        401: errorResponses[401],
        409: jsonResponse(ErrorSchema, "Username already taken"),
      },
    }),
    async (c) => c.json({ user: await createUser(c.get("deps"), c.req.valid("json")) }, 201),
  ),
  remove: operation(
    createRoute({
      ...base,
      method: "delete",
      path: "/users/{id}",
      summary: "Delete a dashboard user (not yourself, not the last one)",
      request: { params: idParam },
      responses: {
        204: { description: "Deleted" },
        400: jsonResponse(ErrorSchema, "You cannot delete your own account / Cannot delete the last user"),
        401: errorResponses[401],
        404: errorResponses[404],
      },
    }),
    async (c) => {
      await deleteUser(c.get("deps"), { actingUserId: c.get("session").userId, userId: c.req.valid("param").id });
      return c.body(null, 204);
    },
  ),
};
