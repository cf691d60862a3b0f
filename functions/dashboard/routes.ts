import { requireSession } from "../middleware";
import { createRouter } from "../router";
import { browseRoutes } from "./browse";
import { jobOperations as jobs } from "./jobs";
import { keyOperations as keys } from "./keys";
import { playgroundOperations as playground } from "./playground";
import { projectOperations as projects } from "./projects";
import { providerOperations as provider } from "./provider";
import { settingOperations as settings } from "./settings";
import { usageOperations as usage } from "./usage";
import { userOperations as users } from "./users";
import { webhookRoutes } from "./webhooks";

/** `/dashboard/*`: the dashboard's API, behind one session check. */
export const dashboardRoutes = createRouter();
dashboardRoutes.use("*", requireSession);

// The OpenAPI document lists paths in the order they are registered: this order keeps it as it was.
for (const op of [
  projects.create,
  projects.list,
  projects.remove,
  projects.stats,
  settings.get,
  settings.patch,
  keys.create,
  keys.list,
  keys.revoke,
  users.list,
  users.create,
  users.remove,
  projects.get,
  settings.fields,
  settings.reset,
  projects.activity,
  projects.extractionFailures,
  provider.status,
  playground.recall,
  usage.overview,
  jobs.failing,
  jobs.retry,
]) {
  op.register(dashboardRoutes);
}

// After the session check above, so /browse/* is covered by it (one check per request).
dashboardRoutes.route("/browse", browseRoutes);
dashboardRoutes.route("/webhooks", webhookRoutes);
