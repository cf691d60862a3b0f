import { handleJobCallback } from "../lib/jobs/callback";
import { jobCallbackUrl } from "../lib/jobs/doorbell";
import { createRouter } from "./router";

/**
 * `POST /jobs/run`: QStash delivers doorbells here. Internal (not in the OpenAPI document);
 * every request must carry a valid `Upstash-Signature` or it gets 401. The signature is checked
 * against the URL QStash was given (PUBLIC_BASE_URL + /jobs/run), not the URL this request
 * arrived on, which a proxy or the platform may have rewritten.
 */
export const jobRoutes = createRouter().post("/run", async (c) => {
  const deps = c.get("deps");
  const base = deps.config.publicBaseUrl;
  const result = await handleJobCallback(deps, {
    signature: c.req.header("upstash-signature"),
    rawBody: await c.req.text(),
    url: base ? jobCallbackUrl(base) : c.req.url,
  });
  return c.json(result, 200);
});
