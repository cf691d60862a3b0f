import type { TestService } from "./service";

/** The parts of the app's OpenAPI 3.1 document the route-wide suites read. */
export type Schema = {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  enum?: unknown[];
  const?: unknown;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  minimum?: number;
  exclusiveMinimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  format?: string;
  default?: unknown;
};
export interface Parameter {
  name: string;
  in: "path" | "query" | "header";
  required?: boolean;
  schema: Schema;
}
export interface Operation {
  security?: Record<string, string[]>[];
  parameters?: Parameter[];
  requestBody?: { required?: boolean; content: Record<string, { schema: Schema }> };
  responses?: Record<string, unknown>;
}
export interface OpenApiDoc {
  openapi?: string;
  info?: { title: string; version: string };
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Schema>; securitySchemes?: Record<string, unknown> };
}

/** The API's paths (the routes the input fuzz sends): /v1, /dashboard, /auth and /health. */
export const API_PATH = /^\/(v1|dashboard|auth|health)\b/;

export interface DocumentedRoute {
  method: string;
  path: string;
  /** "METHOD /path" as documented. */
  label: string;
  op: Operation;
  /** Which credential the route declares; null for public routes. */
  credential: "apiKey" | "session" | null;
}

/**
 * Every route of GET /openapi.json, so a suite over "every route" covers a new one as soon as it
 * is documented.
 */
export async function documentedRoutes(svc: TestService): Promise<{ doc: OpenApiDoc; routes: DocumentedRoute[] }> {
  const doc = (await (await svc.request("/openapi.json")).json()) as OpenApiDoc;
  const routes = Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]): DocumentedRoute => {
      const scheme = op.security?.flatMap((s) => Object.keys(s))[0];
      return {
        method: method.toUpperCase(),
        path,
        label: `${method.toUpperCase()} ${path}`,
        op,
        credential: scheme === "apiKey" || scheme === "session" ? scheme : null,
      };
    }),
  );
  return { doc, routes };
}
