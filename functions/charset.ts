import { createMiddleware } from "hono/factory";
import { HttpError } from "../lib/errors";
import type { AppEnv } from "./env";

/**
 * The `charset` parameter of a Content-Type header, lower-cased; null without one, or when it
 * names UTF-8 (what JSON is, RFC 8259, and what the routes read).
 */
export function nonUtf8Charset(contentType: string | undefined): string | null {
  const match = /;\s*charset\s*=\s*(?:"([^"]*)"|([^;\s]*))/i.exec(contentType ?? "");
  const charset = (match?.[1] ?? match?.[2] ?? "").trim().toLowerCase();
  return charset === "" || charset === "utf-8" || charset === "utf8" ? null : charset;
}

/**
 * A body declared in another charset (`application/json; charset=latin1`) is read as declared and
 * handed on as UTF-8. Read as UTF-8, its non-ASCII bytes became U+FFFD, stored without a word. A
 * charset the platform cannot decode is a 415 naming it; bytes that are not in the charset, a 400.
 */
export const utf8Bodies = createMiddleware<AppEnv>(async function utf8Bodies(c, next) {
  const contentType = c.req.header("content-type");
  const charset = nonUtf8Charset(contentType);
  if (charset === null || !c.req.raw.body) return next();
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(charset, { fatal: true });
  } catch {
    throw new HttpError(415, `Unsupported charset "${charset}" in Content-Type: send the body as UTF-8`);
  }
  let text: string;
  try {
    text = decoder.decode(await c.req.raw.arrayBuffer());
  } catch {
    throw new HttpError(400, `Request body is not valid ${charset}, as its Content-Type says`);
  }
  const headers = new Headers(c.req.raw.headers);
  const mediaType = (contentType ?? "").split(";")[0].trim();
  headers.set("content-type", `${mediaType}; charset=utf-8`);
  headers.delete("content-length");
  c.req.raw = new Request(c.req.raw, { body: text, headers });
  await next();
});
