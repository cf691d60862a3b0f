/**
 * Response bodies typed from the API's generated OpenAPI types (`ui/src/api/schema.d.ts`, written
 * by `npm run ui:types` from the server's own document and checked for drift in CI; it covers
 * /v1, /auth and /dashboard), so a test reads a body as the API declares it instead of a
 * hand-written copy that can drift:
 *
 *     const thread = (await res.json()) as Body<"/v1/threads", "post", 201>;
 *     type Fact = ApiSchema<"Fact">;
 */
import type { components, paths } from "../../ui/src/api/schema";

/** A path of the API, as documented ("/v1/threads/{id}"). */
export type ApiPath = keyof paths;

/** The methods `P` answers. */
export type ApiMethod<P extends ApiPath> = {
  [M in keyof paths[P]]-?: NonNullable<paths[P][M]> extends { responses: unknown } ? M : never;
}[keyof paths[P]];

type Responses<P extends ApiPath, M extends ApiMethod<P>> =
  NonNullable<paths[P][M]> extends { responses: infer R } ? R : never;

/** The JSON body `method path` answers with `status`. */
export type Body<P extends ApiPath, M extends ApiMethod<P>, S extends keyof Responses<P, M>> = Responses<
  P,
  M
>[S] extends { content: { "application/json": infer B } }
  ? B
  : never;

/** The JSON request body `method path` takes. */
export type RequestBody<P extends ApiPath, M extends ApiMethod<P>> =
  NonNullable<paths[P][M]> extends {
    requestBody?: { content: { "application/json": infer B } };
  }
    ? B
    : never;

/** A named schema of the document's components ("Thread", "Fact", "ValidationError"). */
export type ApiSchema<N extends keyof components["schemas"]> = components["schemas"][N];

/** A 400's body: "Validation error" with zod's issues. */
export type ValidationError = ApiSchema<"ValidationError">;
/** One of a 400's issues. */
export type Issue = ValidationError["issues"][number];
