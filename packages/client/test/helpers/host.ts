import type { AddressInfo } from "node:net";
import { createNodeServer } from "../../../../functions/node-host";
import { runDueJobs } from "../../../../lib/jobs/runner";
import { extractFacts, judge, parseTranscript, summarise } from "../../../../scripts/demo-rules";
import { type ChatRequest, type FakeOpenAI, startFakeOpenAI } from "../../../../tests/helpers/fake-openai";
import { createTestService, newTenant, type TestServiceOptions } from "../../../../tests/helpers/service";

/**
 * The Node.js host over real HTTP on loopback (its own server, functions/node-host.ts) on a fresh
 * embedded database, with the tests' fake OpenAI-compatible provider answering as the demo
 * provider's rule-based "model" (scripts/demo-rules.ts), so ending a thread really yields an
 * episode and facts. Jobs run when a test calls `runJobs()`.
 */
export async function startHost(options: Omit<TestServiceOptions, "provider"> = {}) {
  const provider = await startFakeOpenAI();
  provider.onStructured("episode_summary", (r) => summarise(parseTranscript(userText(r.messages))));
  provider.onStructured("fact_extraction", demoFacts);
  provider.onStructured("contradiction_judgement", (r) => judge(userText(r.messages)));
  const service = await createTestService({ ...options, provider });
  const server = createNodeServer({
    fetch: service.app.fetch,
    hostname: "127.0.0.1",
    keepAliveTimeoutMs: service.deps.config.keepAliveTimeoutMs,
    headersTimeoutMs: service.deps.config.headersTimeoutMs,
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    service,
    provider: provider as FakeOpenAI,
    /** A new project and API key. */
    tenant: () => newTenant(service),
    /** Runs every due job (episode extraction after an end) to completion. */
    runJobs: () => runDueJobs(service.deps),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await service.close();
      await provider.close();
    },
  };
}

const userText = (messages: { role: string; content: string }[]) =>
  messages.findLast((m) => m.role === "user")?.content ?? "";

/** The demo rules' answer to a fact_extraction request (a test that replaces the handler restores this one). */
export const demoFacts = (r: ChatRequest) => extractFacts(parseTranscript(userText(r.messages)));

export type Host = Awaited<ReturnType<typeof startHost>>;
