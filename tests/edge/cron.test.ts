import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Receiver } from "@upstash/qstash";
import { describe, expect, it } from "vitest";
import { cronMatches, cronsOfWranglerToml, localScheduledUrl, nextMinute, parseCron } from "../../dev/cron-ticker";
import { parseDelay, signDelivery } from "../../dev/qstash-endpoint";
import { runsSweep, SWEEP_CRON } from "../../lib/jobs/cron";

/**
 * The pure decisions behind background work under `npm run dev`: which cron strings the Worker's
 * scheduled handler accepts, which crons of wrangler.toml the local ticker runs and when, and
 * that the local QStash signs deliveries the way the Worker verifies them.
 */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const WRANGLER_TOML = readFileSync(join(ROOT, "wrangler.toml"), "utf8");

describe("the scheduled handler's cron strings", () => {
  it("runs the sweep for the configured trigger and for an empty or absent cron (a local poke names none)", () => {
    for (const cron of [SWEEP_CRON, "", "  ", undefined, null]) expect(runsSweep(cron), String(cron)).toBe(true);
  });

  it("rejects every other non-empty cron string", () => {
    for (const cron of ["*/5 * * * *", "0 * * * *", "* * * *", "*  * * * *", "* * * * * *", "x", "*"]) {
      expect(runsSweep(cron), cron).toBe(false);
    }
  });

  it("accepts every cron wrangler.toml deploys, and the local ticker can run each of them", () => {
    const crons = cronsOfWranglerToml(WRANGLER_TOML);
    expect(crons).toEqual([SWEEP_CRON]);
    for (const cron of crons) {
      expect(runsSweep(cron)).toBe(true);
      expect(parseCron(cron)).toBeDefined();
    }
  });
});

describe("reading the crons of wrangler.toml", () => {
  it("takes the crons of the [triggers] table only, single- or multi-line, ignoring comments", () => {
    expect(
      cronsOfWranglerToml('[vars]\ncrons = ["0 0 * * *"]\n\n[triggers]\ncrons = ["* * * * *"] # every minute\n'),
    ).toEqual(["* * * * *"]);
    expect(
      cronsOfWranglerToml("[triggers]\ncrons = [\n  \"*/5 * * * *\", # five\n  '0 3 * * *',\n]\n[assets]\n"),
    ).toEqual(["*/5 * * * *", "0 3 * * *"]);
    expect(cronsOfWranglerToml('name = "x"\n[triggers]\n# crons = ["* * * * *"]\n')).toEqual([]);
    expect(cronsOfWranglerToml("[triggers]\ncrons = []\n")).toEqual([]);
    expect(cronsOfWranglerToml("")).toEqual([]);
  });
});

describe("when the local ticker runs a cron", () => {
  const at = (iso: string) => new Date(iso);

  it("runs `* * * * *` every minute", () => {
    const every = parseCron("* * * * *");
    expect(every).toBeDefined();
    for (const iso of ["2026-01-01T00:00:00Z", "2026-06-30T13:37:00Z", "2026-12-31T23:59:00Z"]) {
      expect(cronMatches(every!, at(iso))).toBe(true);
    }
  });

  it("matches minutes and hours in UTC with lists, ranges and steps", () => {
    const five = parseCron("*/5 * * * *")!;
    expect(cronMatches(five, at("2026-01-01T10:05:00Z"))).toBe(true);
    expect(cronMatches(five, at("2026-01-01T10:06:00Z"))).toBe(false);
    const office = parseCron("0,30 9-17 * * *")!;
    expect(cronMatches(office, at("2026-01-01T09:30:00Z"))).toBe(true);
    expect(cronMatches(office, at("2026-01-01T17:00:00Z"))).toBe(true);
    expect(cronMatches(office, at("2026-01-01T18:00:00Z"))).toBe(false);
    expect(cronMatches(office, at("2026-01-01T09:15:00Z"))).toBe(false);
    const stepped = parseCron("10-50/20 */6 * * *")!;
    expect([...stepped.minutes]).toEqual([10, 30, 50]);
    expect([...stepped.hours]).toEqual([0, 6, 12, 18]);
  });

  it("leaves what it cannot read exactly to a manual trigger (undefined), never guesses", () => {
    for (const cron of [
      "0 0 * * MON",
      "0 0 1 * *",
      "59 23 LW * *",
      "0 0 * * 1#2",
      "60 * * * *",
      "* 24 * * *",
      "* * * *",
      "a b c d e",
      "5-1 * * * *",
      "*/0 * * * *",
    ]) {
      expect(parseCron(cron), cron).toBeUndefined();
    }
  });

  it("ticks at the start of each minute and asks wrangler for that cron at that time", () => {
    expect(nextMinute(at("2026-01-01T10:05:59.999Z")).toISOString()).toBe("2026-01-01T10:06:00.000Z");
    expect(nextMinute(at("2026-01-01T10:05:00.000Z")).toISOString()).toBe("2026-01-01T10:06:00.000Z");
    const url = new URL(localScheduledUrl("http://127.0.0.1:8787/", "* * * * *", at("2026-01-01T10:06:00Z")));
    expect(url.origin + url.pathname).toBe("http://127.0.0.1:8787/cdn-cgi/local/scheduled");
    expect(Object.fromEntries(url.searchParams)).toEqual({
      cron: "* * * * *",
      time: String(Date.parse("2026-01-01T10:06:00Z")),
      format: "json",
    });
  });
});

describe("the local QStash", () => {
  it("signs a delivery so the Worker's verification (the SDK's Receiver) accepts it, and only for its URL and body", async () => {
    const receiver = new Receiver({ currentSigningKey: "sig_a", nextSigningKey: "sig_b", devMode: false });
    const url = "http://127.0.0.1:8787/jobs/run";
    const body = JSON.stringify({ key: "episode:epi_1" });
    const signature = signDelivery("sig_a", url, body);
    expect(await receiver.verify({ signature, body, url })).toBe(true);
    expect(await receiver.verify({ signature: signDelivery("sig_b", url, body), body, url })).toBe(true);
    await expect(receiver.verify({ signature, body: `${body} `, url })).rejects.toThrow();
    await expect(receiver.verify({ signature, body, url: "http://127.0.0.1:9999/jobs/run" })).rejects.toThrow();
    await expect(receiver.verify({ signature: signDelivery("sig_c", url, body), body, url })).rejects.toThrow();
  });

  it("reads Upstash-Delay", () => {
    expect(parseDelay("30s")).toBe(30_000);
    expect(parseDelay("1h30m")).toBe(5_400_000);
    expect(parseDelay("2d")).toBe(172_800_000);
    for (const bad of ["", "30", "s", "1.5s", "-1s"]) expect(parseDelay(bad), bad).toBeUndefined();
  });
});
