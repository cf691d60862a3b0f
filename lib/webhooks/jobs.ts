import type { JobHandler } from "../jobs/registry";
import { deliverWebhook } from "./deliver";

/** The `webhook` job: one attempt of one delivery; its next attempt is this job again. */
export const webhookJob: JobHandler = async (deps, job) => {
  const retryAt = await deliverWebhook(deps, String(job.payload.deliveryId));
  return retryAt ? { next: "later", runAt: retryAt, ring: true } : { next: "done" };
};
