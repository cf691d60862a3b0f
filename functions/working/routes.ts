import { requireApiKey } from "../middleware";
import { createRouter } from "../router";
import { batchRoutes } from "./batch";
import { chatRoutes } from "./chat";
import { messageRoutes } from "./messages";

/** `/v1/memory/working/*`: a thread's messages, its context window, chat and batches. */
export const workingRoutes = createRouter();
workingRoutes.use("*", requireApiKey);
workingRoutes.route("/", messageRoutes).route("/", chatRoutes).route("/", batchRoutes);
