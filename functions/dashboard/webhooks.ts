import { createRoute, z } from "@hono/zod-openapi";
import {
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  enableWebhookEndpoint,
  listWebhookDeliveries,
  listWebhookEndpoints,
  replayWebhookDelivery,
  rotateWebhookSecret,
  updateWebhookEndpoint,
} from "../../lib/webhooks/endpoints";
import { WEBHOOK_EVENT_TYPES } from "../../lib/webhooks/events";
import { dashboardProjectContext } from "../context";
import { createRouter } from "../router";
import { ErrorSchema, errorResponses } from "../schemas/errors";
import { jsonBody, jsonResponse, security } from "../schemas/http";
import { Iso, pageQuery, pathParams, text } from "../schemas/inputs";

/**
 * /dashboard/webhooks/*: a project's webhook endpoints and their deliveries. Mounted inside the
 * dashboard router (functions/dashboard/routes.ts), whose requireSession covers it.
 */
const base = { tags: ["Internal: dashboard"], security: security.session };

const idParam = pathParams("id");
const EventTypeSchema = z.enum(WEBHOOK_EVENT_TYPES).openapi("WebhookEventType");
const UrlSchema = text().min(1).max(2000).openapi({
  format: "uri",
  example: "https://hooks.example.com/memory",
  description:
    "https:// only; no private, loopback or link-local addresses (http:// and loopback to localhost, 127.0.0.1 or [::1] only with WEBHOOKS_ALLOW_HTTP=true on the server, for development).",
});
const EventTypesSchema = z.array(EventTypeSchema).min(1);
const SecretSchema = z.string().openapi({ description: "`whsec_…`: verify signatures with it (Standard Webhooks)." });

const WebhookEndpointSchema = z
  .object({
    id: z.string(),
    projectId: z.string(),
    url: z.string(),
    eventTypes: z.array(z.string()),
    createdAt: Iso,
    failingSince: Iso.nullable().openapi({ description: "First failed attempt of the current streak." }),
    disabledAt: Iso.nullable().openapi({ description: "Set after a day of failures: nothing is delivered." }),
    disabledReason: z.string().nullable(),
    lastDelivery: z
      .object({
        id: z.string(),
        eventType: z.string(),
        status: z.enum(["pending", "succeeded", "failed"]),
        statusCode: z.number().int().nullable(),
        error: z.string().nullable(),
        at: Iso,
      })
      .nullable()
      .openapi({ description: "The delivery attempted last, with its last attempt's outcome." }),
    nextAttemptAt: Iso.nullable().openapi({ description: "The soonest attempt waiting for this endpoint." }),
    pendingDeliveries: z.number().int(),
  })
  .openapi("WebhookEndpoint");

const WebhookDeliverySchema = z
  .object({
    id: z.string().openapi({ description: "The `webhook-id` header (the same on every attempt and replay)." }),
    endpointId: z.string(),
    eventType: z.string(),
    status: z.enum(["pending", "succeeded", "failed"]),
    attempts: z.number().int(),
    nextAttemptAt: Iso.nullable(),
    retryUntil: Iso.openapi({
      description:
        "No retry after this (a day after the event or the replay); a delivery not attempted by then (the service was down) is attempted once.",
    }),
    lastStatusCode: z.number().int().nullable(),
    lastError: z.string().nullable(),
    createdAt: Iso,
    updatedAt: Iso,
    payload: z.record(z.string(), z.unknown()).openapi({ description: "The body sent: {type, timestamp, data}." }),
    attemptLog: z.array(
      z.object({
        at: Iso,
        statusCode: z.number().int().nullable(),
        error: z.string().nullable(),
        durationMs: z.number().int(),
      }),
    ),
  })
  .openapi("WebhookDelivery");

const routes = {
  create: createRoute({
    ...base,
    method: "post",
    path: "/",
    summary: "Register a webhook endpoint (its signing secret is shown only in this response)",
    request: jsonBody(
      z.object({
        projectId: text().min(1),
        url: UrlSchema,
        eventTypes: EventTypesSchema,
      }),
    ),
    responses: {
      201: jsonResponse(
        z.object({
          secret: SecretSchema,
          endpoint: WebhookEndpointSchema,
        }),
        "Created",
      ),
      400: errorResponses[400],
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  list: createRoute({
    ...base,
    method: "get",
    path: "/",
    summary: "List a project's webhook endpoints with their last delivery and next attempt",
    request: { query: z.object({ projectId: text().min(1), ...pageQuery }) },
    responses: {
      200: jsonResponse(
        z.object({ endpoints: z.array(WebhookEndpointSchema), total: z.number().int() }),
        "A page of endpoints, newest first, and the project's count",
      ),
      400: errorResponses[400],
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  remove: createRoute({
    ...base,
    method: "delete",
    path: "/{id}",
    summary: "Delete a webhook endpoint and its deliveries",
    request: { params: idParam },
    responses: { 204: { description: "Deleted" }, 401: errorResponses[401], 404: errorResponses[404] },
  }),
  update: createRoute({
    ...base,
    method: "patch",
    path: "/{id}",
    summary: "Change a webhook endpoint's URL or event types",
    description:
      "Checked as at registration. A field left out keeps its value; an empty body changes nothing. The deliveries and their history stay: a pending delivery goes to the new URL at its next attempt.",
    request: {
      params: idParam,
      ...jsonBody(z.object({ url: UrlSchema.optional(), eventTypes: EventTypesSchema.optional() })),
    },
    responses: {
      200: jsonResponse(z.object({ endpoint: WebhookEndpointSchema }), "Updated"),
      400: errorResponses[400],
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  rotateSecret: createRoute({
    ...base,
    method: "post",
    path: "/{id}/rotate-secret",
    summary: "Give a webhook endpoint a new signing secret (shown only in this response)",
    description:
      "For 24 hours every attempt is signed with both the new secret and the one it replaced (two signatures in `webhook-signature`), then with the new one alone. A rotation within those 24 hours replaces the previous secret: the one before it stops signing at once.",
    request: { params: idParam },
    responses: {
      200: jsonResponse(
        z.object({
          secret: SecretSchema,
          previousSecretExpiresAt: Iso.openapi({
            description: "Until then every attempt is also signed with the secret this one replaced.",
          }),
          endpoint: WebhookEndpointSchema,
        }),
        "Rotated",
      ),
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  enable: createRoute({
    ...base,
    method: "post",
    path: "/{id}/enable",
    summary: "Enable a disabled webhook endpoint again",
    request: { params: idParam },
    responses: {
      200: jsonResponse(z.object({ endpoint: WebhookEndpointSchema }), "Enabled"),
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  deliveries: createRoute({
    ...base,
    method: "get",
    path: "/{id}/deliveries",
    summary: "An endpoint's deliveries, newest first, with their attempts",
    request: {
      params: idParam,
      query: z.object({ ...pageQuery, status: z.enum(["pending", "succeeded", "failed"]).optional() }),
    },
    responses: {
      200: jsonResponse(
        z.object({ deliveries: z.array(WebhookDeliverySchema), total: z.number().int() }),
        "Deliveries",
      ),
      400: errorResponses[400],
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  replay: createRoute({
    ...base,
    method: "post",
    path: "/deliveries/{id}/replay",
    summary: "Send a delivery again (same webhook-id, a new day of retries)",
    request: { params: idParam },
    responses: {
      200: jsonResponse(z.object({ delivery: WebhookDeliverySchema }), "Queued"),
      401: errorResponses[401],
      404: errorResponses[404],
      409: jsonResponse(ErrorSchema, "The endpoint is disabled"),
    },
  }),
};

export const webhookRoutes = createRouter();

webhookRoutes
  .openapi(routes.create, async (c) => {
    const { projectId, ...input } = c.req.valid("json");
    return c.json(await createWebhookEndpoint(dashboardProjectContext(c, projectId), input), 201);
  })
  .openapi(routes.list, async (c) =>
    c.json(
      await listWebhookEndpoints(dashboardProjectContext(c, c.req.valid("query").projectId), c.req.valid("query")),
      200,
    ),
  )
  .openapi(routes.remove, async (c) => {
    await deleteWebhookEndpoint(c.get("deps"), { endpointId: c.req.valid("param").id });
    return c.body(null, 204);
  })
  .openapi(routes.update, async (c) =>
    c.json(
      {
        endpoint: await updateWebhookEndpoint(c.get("deps"), {
          endpointId: c.req.valid("param").id,
          ...c.req.valid("json"),
        }),
      },
      200,
    ),
  )
  .openapi(routes.rotateSecret, async (c) =>
    c.json(await rotateWebhookSecret(c.get("deps"), { endpointId: c.req.valid("param").id }), 200),
  )
  .openapi(routes.enable, async (c) =>
    c.json({ endpoint: await enableWebhookEndpoint(c.get("deps"), { endpointId: c.req.valid("param").id }) }, 200),
  )
  .openapi(routes.deliveries, async (c) =>
    c.json(
      await listWebhookDeliveries(c.get("deps"), { endpointId: c.req.valid("param").id, ...c.req.valid("query") }),
      200,
    ),
  )
  .openapi(routes.replay, async (c) =>
    c.json({ delivery: await replayWebhookDelivery(c.get("deps"), { deliveryId: c.req.valid("param").id }) }, 200),
  );
