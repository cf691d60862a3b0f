import { describe, expect, it } from "vitest";
import {
  DEFAULT_OUT,
  DEFAULT_SCENARIOS,
  EMBEDDED_ONLY,
  parseBenchArgs,
  parseCount,
  SCENARIOS,
  UsageError,
  usage,
} from "./args";

describe("bench switches", () => {
  it("defaults: every scenario but the long ones, 1k and 10k facts, 256 dims, latest.json", () => {
    const a = parseBenchArgs([]);
    expect(a).toMatchObject({ quick: false, facts: [1_000, 10_000], dims: [256], out: DEFAULT_OUT, disk: false });
    expect(a.only).toEqual(DEFAULT_SCENARIOS);
    expect(a.only).not.toContain("hnsw");
    expect(parseBenchArgs(["--quick"]).facts).toEqual([1_000]);
  });

  it("reads sizes in 1e6 notation, dimensions, scenarios and the output file", () => {
    const a = parseBenchArgs([
      "--facts",
      "1e3,1e4,100000,1e6",
      "--dims=256,1536",
      "--only",
      "recall,hnsw",
      "--out",
      "x.json",
    ]);
    expect(a.facts).toEqual([1_000, 10_000, 100_000, 1_000_000]);
    expect(a.dims).toEqual([256, 1536]);
    expect(a.only).toEqual(["recall", "hnsw"]);
    expect(a.out).toBe("x.json");
  });

  it("reads the HNSW sweep: ef_search values, iterative modes, m and ef_construction", () => {
    const a = parseBenchArgs([
      "--ef-search",
      "40,400",
      "--iterative",
      "off,strict_order",
      "--m",
      "32",
      "--ef-construction=128",
    ]);
    expect(a).toMatchObject({ efSearch: [40, 400], iterative: ["off", "strict_order"], m: 32, efConstruction: 128 });
    expect(parseBenchArgs([]).secondSearch).toBe(true);
    expect(parseBenchArgs(["--second-search", "off"]).secondSearch).toBe(false);
    expect(() => parseBenchArgs(["--second-search", "no"])).toThrow(/on or off/);
    expect(parseBenchArgs(["--disk", "--shared-buffers", "128MB"])).toMatchObject({
      disk: true,
      sharedBuffers: "128MB",
    });
    expect(parseBenchArgs(["--data-dir", "d", "--shared-buffers", "1200MB", "--facts", "1e6"])).toMatchObject({
      sharedBuffers: "1200MB",
      facts: [1_000_000],
    });
    expect(parseBenchArgs(["--shared-buffers", "1200MB", "--facts", "1e5"]).sharedBuffers).toBe("1200MB");
  });

  it("reads the neighbour share, a kept data directory (which implies --disk) and the server's Node.js flags", () => {
    expect(parseBenchArgs([]).neighbours).toBe(1);
    expect(parseBenchArgs([]).nodeFlags).toBeUndefined();
    expect(parseBenchArgs(["--neighbours", "0.1", "--data-dir", "/tmp/x"])).toMatchObject({
      neighbours: 0.1,
      dataDir: "/tmp/x",
      disk: true,
    });
    expect(parseBenchArgs(["--neighbours=0"]).neighbours).toBe(0);
    expect(parseBenchArgs(["--node-flags=--liftoff-only,--max-semi-space-size=1"]).nodeFlags).toEqual([
      "--liftoff-only",
      "--max-semi-space-size=1",
    ]);
    expect(parseBenchArgs(["--node-flags=none"]).nodeFlags).toEqual([]);
  });

  it.each([
    [["--big"], /unknown switch: --big/],
    [["--facts"], /--facts needs a value/],
    [["--facts", "1e-3"], /not a positive integer/],
    [["--facts", "0"], /not a positive integer/],
    [["--facts", "1.5e0"], /not a positive integer/],
    [["--facts", "lots"], /not a positive integer/],
    [["--facts", ","], /at least one value/],
    [["--only", "recall,nope"], /unknown scenario nope/],
    [["--dims", "5000"], /at most 4000/],
    [["--iterative", "loose"], /off, relaxed_order or strict_order/],
    [["--shared-buffers", "32"], /a size such as 32MB/],
    [["--shared-buffers", "1200MB", "--facts", "1e4,1e6"], /also --disk or --data-dir/],
    [["--neighbours", "1.5"], /a share of --facts from 0 to 1/],
    [["--neighbours", "10%"], /a share of --facts from 0 to 1/],
    [["--node-flags", "liftoff-only"], /start with --/],
  ])("refuses %j", (argv, message) => {
    expect(() => parseBenchArgs(argv)).toThrow(UsageError);
    expect(() => parseBenchArgs(argv)).toThrow(message);
  });

  it("--database-url: a postgres URL naming a database; the default scenarios without the embedded-only ones", () => {
    const url = "postgres://postgres@127.0.0.1:5432/postgres";
    expect(parseBenchArgs([]).databaseUrl).toBeUndefined();
    const a = parseBenchArgs(["--database-url", url]);
    expect(a.databaseUrl).toBe(url);
    expect(a.only).toEqual(DEFAULT_SCENARIOS.filter((s) => !EMBEDDED_ONLY.includes(s)));
    expect(a.only).toContain("recall");
    expect(a.only).not.toContain("durability");
    expect(
      parseBenchArgs([`--database-url=postgresql://u:p@db:6543/bench`, "--only", "recall,tenants,load,hnsw"]),
    ).toMatchObject({ databaseUrl: "postgresql://u:p@db:6543/bench", only: ["recall", "tenants", "load", "hnsw"] });
    // The switches' order does not matter.
    expect(parseBenchArgs(["--only", "tenants", "--database-url", url]).only).toEqual(["tenants"]);
    expect(usage()).toContain("--database-url");
  });

  it.each([
    [["--database-url", "localhost:5432"], /a postgres:\/\/ or postgresql:\/\/ URL/],
    [["--database-url", "not a url"], /not a URL/],
    [["--database-url", "mysql://db/x"], /a postgres:\/\/ or postgresql:\/\/ URL/],
    [["--database-url", "postgres://db:5432"], /name the database/],
    [["--database-url", "postgres://db/postgres", "--disk"], /not with --disk \(embedded database only\)/],
    [["--data-dir=/tmp/x", "--database-url", "postgres://db/postgres"], /not with --data-dir/],
    [["--database-url", "postgres://db/postgres", "--shared-buffers", "1GB"], /not with --shared-buffers/],
    [["--database-url", "postgres://db/postgres", "--only", "recall,durability"], /durability: embedded database only/],
    [["--only", "server-rss", "--database-url", "postgres://db/postgres"], /server-rss: embedded database only/],
  ])("--database-url refuses %j", (argv, message) => {
    expect(() => parseBenchArgs(argv)).toThrow(UsageError);
    expect(() => parseBenchArgs(argv)).toThrow(message);
  });

  it("parses counts exactly: 1e6 is a million, 2.5e3 is 2,500", () => {
    expect(parseCount("1e6", "x")).toBe(1_000_000);
    expect(parseCount("2.5e3", "x")).toBe(2_500);
  });

  it("--help is a flag; the usage line names every scenario", () => {
    expect(parseBenchArgs(["--help"]).help).toBe(true);
    for (const name of Object.keys(SCENARIOS)) expect(usage()).toContain(name);
  });
});
