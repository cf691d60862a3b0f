import { createServer } from "node:http";
import { describe, expect, it } from "vitest";
import { dueCrons, parseCron, scheduledOutcome, startCronTicker } from "./cron-ticker";

describe("dueCrons", () => {
  it("the crons that run in the minute, in order", () => {
    const schedules = ["*/5 * * * *", "0 3 * * *", "* * * * *"].map((c) => parseCron(c)).filter((s) => s !== undefined);
    expect(dueCrons(schedules, new Date("2026-01-01T03:00:30Z"))).toEqual(["*/5 * * * *", "0 3 * * *", "* * * * *"]);
    expect(dueCrons(schedules, new Date("2026-01-01T04:01:00Z"))).toEqual(["* * * * *"]);
  });
});

describe("scheduledOutcome", () => {
  it("the JSON answer's outcome, else the text", () => {
    expect(scheduledOutcome('{"outcome":"ok"}')).toBe("ok");
    expect(scheduledOutcome('{"outcome":"exception"}')).toBe("exception");
    expect(scheduledOutcome("{}")).toBe("{}");
    expect(scheduledOutcome("Internal Server Error")).toBe("Internal Server Error");
  });
});

describe("startCronTicker", () => {
  it("runs each schedule once at start and logs a run whose outcome is not ok", async () => {
    const seen: string[] = [];
    const worker = createServer((req, res) => {
      const cron = new URL(req.url ?? "", "http://x").searchParams.get("cron") ?? "";
      seen.push(cron);
      res.end(JSON.stringify({ outcome: cron === "0 3 * * *" ? "exception" : "ok" }));
    });
    await new Promise<void>((r) => worker.listen(0, "127.0.0.1", () => r()));
    const errors: string[] = [];
    const infos: string[] = [];
    const ticker = startCronTicker({
      baseUrl: `http://127.0.0.1:${(worker.address() as { port: number }).port}`,
      schedules: ["* * * * *", "0 3 * * *"].map((c) => parseCron(c)).filter((s) => s !== undefined),
      log: { info: (m) => infos.push(m), error: (m) => errors.push(m) },
    });
    await ticker.started;
    ticker.stop();
    await new Promise((r) => worker.close(r));
    expect(seen).toEqual(["* * * * *", "0 3 * * *"]);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^cron "0 3 \* \* \*" at .*: exception \(200\)$/);
    expect(infos).toEqual(['start-up run of "* * * * *", "0 3 * * *" done']);
  });
});
