import { createRoute, z } from "@hono/zod-openapi";
import { projectSettingFields, resetProjectSetting, SETTING_GROUPS } from "../../lib/settings/fields";
import { settingsPatchSchema } from "../../lib/settings/settings";
import { getProjectSettings, patchProjectSettings } from "../../lib/settings/store";
import { dashboardProjectContext } from "../context";
import { operation } from "../router";
import { ErrorSchema, errorResponses } from "../schemas/errors";
import { jsonBody, jsonResponse, security } from "../schemas/http";
import { pathParams } from "../schemas/inputs";

/** `/dashboard/projects/{id}/settings`: a project's merged settings, as an object and as form fields. */
const base = { tags: ["Internal: dashboard"], security: security.session };
const idParam = pathParams("id");

const SettingsSchema = z
  .object({
    working: z.record(z.string(), z.unknown()),
    episodic: z.record(z.string(), z.unknown()),
    semantic: z.record(z.string(), z.unknown()),
    usage: z.record(z.string(), z.unknown()),
  })
  .openapi("ProjectSettings", { description: "Fully merged settings (defaults, then the project's values)." });

const settingValue = z.union([z.boolean(), z.number()]).nullable();
const SettingFieldSchema = z
  .object({
    group: z.enum(SETTING_GROUPS as [string, ...string[]]),
    key: z.string(),
    type: z.enum(["boolean", "integer", "number"]),
    nullable: z.boolean().openapi({ description: "null is accepted (it turns the feature off)." }),
    minimum: z.number().nullable(),
    maximum: z.number().nullable(),
    default: settingValue,
    value: settingValue.openapi({ description: "The merged value: the project's own, else the default." }),
    overridden: z.boolean().openapi({ description: "The project stores its own value for this key." }),
    description: z.string(),
  })
  .openapi("SettingField", {
    description: "One setting as the settings form shows it; the bounds are those PATCH validates with.",
  });
const fieldsResponse = z.object({ fields: z.array(SettingFieldSchema) });

export const settingOperations = {
  get: operation(
    createRoute({
      ...base,
      method: "get",
      path: "/projects/{id}/settings",
      summary: "A project's merged settings",
      request: { params: idParam },
      responses: {
        200: jsonResponse(z.object({ settings: SettingsSchema }), "Settings"),
        401: errorResponses[401],
        404: errorResponses[404],
      },
    }),
    async (c) =>
      c.json({ settings: await getProjectSettings(dashboardProjectContext(c, c.req.valid("param").id)) }, 200),
  ),
  patch: operation(
    createRoute({
      ...base,
      method: "patch",
      path: "/projects/{id}/settings",
      summary: "Deep-merge a partial settings object into the project's settings",
      request: { params: idParam, ...jsonBody(settingsPatchSchema) },
      responses: {
        200: jsonResponse(z.object({ settings: SettingsSchema }), "Settings after the merge"),
        400: errorResponses[400],
        401: errorResponses[401],
        404: errorResponses[404],
        409: jsonResponse(ErrorSchema, "Other changes kept landing first (many at once): try again"),
      },
    }),
    async (c) =>
      c.json(
        {
          settings: await patchProjectSettings(
            dashboardProjectContext(c, c.req.valid("param").id),
            c.req.valid("json"),
          ),
        },
        200,
      ),
  ),
  fields: operation(
    createRoute({
      ...base,
      method: "get",
      path: "/projects/{id}/settings/fields",
      summary: "A project's settings as form fields: type, bounds, default, value, overridden",
      description: "Groups working, episodic, semantic, usage; keys in the defaults' order.",
      request: { params: idParam },
      responses: {
        200: jsonResponse(fieldsResponse, "Fields"),
        401: errorResponses[401],
        404: errorResponses[404],
      },
    }),
    async (c) =>
      c.json({ fields: await projectSettingFields(dashboardProjectContext(c, c.req.valid("param").id)) }, 200),
  ),
  reset: operation(
    createRoute({
      ...base,
      method: "delete",
      path: "/projects/{id}/settings/{group}/{key}",
      summary: "Remove the project's own value of a setting, so the default applies again",
      description:
        "A setting the project does not override is left alone (200). Rejected with 400 when the default would break contradictionBandMin <= factDedupThreshold.",
      request: {
        params: idParam.extend({
          group: z
            .string()
            .min(1)
            .openapi({ param: { name: "group", in: "path" }, description: "working, episodic, semantic or usage." }),
          key: z
            .string()
            .min(1)
            .openapi({ param: { name: "key", in: "path" } }),
        }),
      },
      responses: {
        200: jsonResponse(fieldsResponse, "The fields after the removal"),
        400: errorResponses[400],
        401: errorResponses[401],
        404: jsonResponse(ErrorSchema, "Project not found / Setting not found"),
        409: jsonResponse(ErrorSchema, "Other changes kept landing first (many at once): try again"),
      },
    }),
    async (c) => {
      const { id, group, key } = c.req.valid("param");
      return c.json({ fields: await resetProjectSetting(dashboardProjectContext(c, id), { group, key }) }, 200);
    },
  ),
};
