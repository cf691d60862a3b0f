import type { JobHandler } from "../jobs/registry";
import { deliverWebhook } from "./deliver";

/**
 * The `webhook` job: one attempt of one delivery; its next attempt is this job again, carrying
 * the attempt's error, so the dashboard's jobs retrying list shows the delivery and why.
 */
export const webhookJob: JobHandler = async (deps, job) => {
  const retry = await deliverWebhook(deps, String(job.payload.deliveryId));
  return retry ? { next: "later", runAt: retry.retryAt, error: retry.error, ring: true } : { next: "done" };
};
