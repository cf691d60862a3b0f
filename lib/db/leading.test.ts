import { describe, expect, it } from "vitest";
import { LeadGate, type LeadingStatement, leadFirstLog } from "./leading";

/** A lead that accepts a row with `ok: true` and refuses anything else. */
function lead(): LeadingStatement & { seen: Record<string, unknown>[][] } {
  const seen: Record<string, unknown>[][] = [];
  return {
    seen,
    query: { sql: "SELECT 1", params: [] },
    accept(rows) {
      seen.push(rows);
      if (rows[0]?.ok !== true) throw new Error("refused");
    },
  };
}

describe("LeadGate", () => {
  it("lets exactly one caller take the lead; the others wait for its outcome", async () => {
    const l = lead();
    let sentAlone = 0;
    const gate = new LeadGate(l, async () => {
      sentAlone++;
      return [{ ok: true }];
    });
    expect(gate.take()).toBe(true);
    expect(gate.take()).toBe(false);
    let waited = false;
    const waiting = gate.settle().then(() => {
      waited = true;
    });
    await Promise.resolve();
    expect(waited).toBe(false);
    gate.settleWith([{ ok: true }]);
    await waiting;
    expect(waited).toBe(true);
    expect(sentAlone).toBe(0);
    expect(l.seen).toEqual([[{ ok: true }]]);
  });

  it("a refusal is every later caller's error, and the lead is never sent again", async () => {
    let sentAlone = 0;
    const gate = new LeadGate(lead(), async () => {
      sentAlone++;
      return [{ ok: true }];
    });
    expect(gate.take()).toBe(true);
    gate.settleWith([{ ok: false }]);
    await expect(gate.settle()).rejects.toThrow("refused");
    await expect(gate.settle()).rejects.toThrow("refused");
    expect(gate.take()).toBe(false);
    expect(sentAlone).toBe(0);
  });

  it("sends the lead alone when no statement took it, once", async () => {
    let sentAlone = 0;
    const gate = new LeadGate(lead(), async () => {
      sentAlone++;
      return [{ ok: true }];
    });
    await Promise.all([gate.settle(), gate.settle()]);
    await gate.settle();
    expect(sentAlone).toBe(1);
  });

  it("after a failed combined round trip, the lead alone decides: its refusal wins over the work's error", async () => {
    const refusing = new LeadGate(lead(), async () => [{ ok: false }]);
    expect(refusing.take()).toBe(true);
    await expect(refusing.settleAfterFailure()).rejects.toThrow("refused");
    await expect(refusing.settle()).rejects.toThrow("refused");

    const accepting = new LeadGate(lead(), async () => [{ ok: true }]);
    expect(accepting.take()).toBe(true);
    await accepting.settleAfterFailure();
    await expect(accepting.settle()).resolves.toBeUndefined();
  });

  it("without carried rows, a failed round trip is the request's error, sent once", async () => {
    let sent = 0;
    const failing = new LeadGate(lead(), async () => {
      sent++;
      throw new Error("connection lost");
    });
    await expect(failing.settle()).rejects.toThrow("connection lost");
    expect(sent).toBe(1);
    expect(failing.dropCarried(new Error("again"))).toBe(false);
  });

  it("gives back what it carried when a round trip with it fails, and goes again bare, once", async () => {
    const bare = { sql: "SELECT 1 -- bare", params: [] };
    const given: unknown[] = [];
    const sent: string[] = [];
    const carrying = (answer: (query: { sql: string }) => Record<string, unknown>[]) =>
      new LeadGate({ ...lead(), carried: { bare, giveBack: (err) => given.push(err) } }, async (query) => {
        sent.push(query.sql);
        return answer(query);
      });
    const failsCarrying = (query: { sql: string }) => {
      if (query !== bare) throw new Error("foreign key");
      return [{ ok: true }];
    };

    // Sent alone: the bare lead decides.
    await carrying(failsCarrying).settle();
    expect(sent).toEqual(["SELECT 1", "SELECT 1 -- bare"]);
    expect(given).toEqual([new Error("foreign key")]);

    // Its refusal is still the request's answer; a refusal gives nothing back.
    sent.length = 0;
    given.length = 0;
    await expect(carrying(() => [{ ok: false }]).settle()).rejects.toThrow("refused");
    expect(given).toEqual([]);

    // A driver that sent it with the work: `dropCarried` tells it to go again with `query`, bare now.
    const combined = carrying(failsCarrying);
    expect(combined.take()).toBe(true);
    expect(combined.query.sql).toBe("SELECT 1");
    expect(combined.dropCarried(new Error("in the transaction"))).toBe(true);
    expect(combined.query).toBe(bare);
    expect(combined.dropCarried(new Error("the work's own"))).toBe(false);
    expect(given).toEqual([new Error("in the transaction")]);

    // A bare lead that fails too: its error, nothing more given back.
    sent.length = 0;
    given.length = 0;
    const down = carrying(() => {
      throw new Error("connection lost");
    });
    await expect(down.settle()).rejects.toThrow("connection lost");
    expect(sent).toEqual(["SELECT 1", "SELECT 1 -- bare"]);
    expect(given).toHaveLength(1);
  });
});

describe("leadFirstLog", () => {
  it("logs the lead once, ahead of the first statement drizzle issues", () => {
    const log: string[] = [];
    const { logLead, logger } = leadFirstLog(lead(), (sql) => log.push(sql));
    if (!logger) throw new Error("a logger was expected");
    logger.logQuery("SELECT first", []);
    logLead(); // the view sends the lead (alone or with the statement): already logged
    logger.logQuery("SELECT second", []);
    expect(log).toEqual(["SELECT 1", "SELECT first", "SELECT second"]);
  });

  it("logs a lead sent alone when it goes, and not again before a later statement", () => {
    const log: string[] = [];
    const { logLead, logger } = leadFirstLog(lead(), (sql) => log.push(sql));
    logLead();
    if (logger) logger.logQuery("SELECT later", []);
    expect(log).toEqual(["SELECT 1", "SELECT later"]);
  });

  it("logs the bare lead each time it goes (after the lead failed)", () => {
    const log: string[] = [];
    const { logLead, logger } = leadFirstLog(lead(), (sql) => log.push(sql));
    if (logger) logger.logQuery("SELECT first", []);
    logLead({ sql: "SELECT 1 -- bare", params: [] });
    expect(log).toEqual(["SELECT 1", "SELECT first", "SELECT 1 -- bare"]);
  });

  it("has no logger without a hook", () => {
    const { logLead, logger } = leadFirstLog(lead(), undefined);
    expect(logger).toBe(false);
    expect(() => logLead()).not.toThrow();
  });
});
