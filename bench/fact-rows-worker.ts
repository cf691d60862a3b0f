import { parentPort } from "node:worker_threads";
import { type FactChunkRequest, factChunk } from "./fact-rows";

/** Makes chunks of seeded facts for the loader on the machine's other core (see FactChunks). */
parentPort?.on("message", (request: FactChunkRequest) => {
  const chunk = factChunk(request);
  parentPort?.postMessage(chunk, [chunk.facts.buffer, chunk.links.buffer]);
});
