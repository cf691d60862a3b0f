import { readFileSync } from "node:fs";

/**
 * Summarises a V8 .cpuprofile: self time by function and by where the code lives (Postgres in
 * WASM, PGlite's JS glue, drizzle, Hono and the service, Node internals, idle), so "where does the
 * time go" is read from a profile, not guessed.
 * `node --import tsx bench/profile-summary.ts <file.cpuprofile> [top]`
 */
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export function areaOf(url: string, fn: string): string {
  if (fn === "(idle)") return "idle (waiting)";
  if (fn === "(garbage collector)") return "garbage collector";
  if (fn === "(program)") return "V8 (program)";
  if (url.startsWith("wasm://")) return "Postgres (WASM)";
  if (url.includes("@electric-sql/pglite")) return "PGlite JS glue (protocol, parsing, fs)";
  if (url.includes("drizzle-orm")) return "drizzle-orm";
  if (url.includes("/hono") || url.includes("@hono")) return "Hono / zod-openapi";
  if (url.includes("/zod")) return "zod";
  if (url.includes("node_modules")) return "other dependencies";
  if (url.startsWith("node:") || url === "") return "Node internals";
  return "service code (lib/, functions/, bench/)";
}

export function summarise(profile: Profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  for (const [i, id] of profile.samples.entries()) selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  const byFunction = new Map<string, number>();
  const byArea = new Map<string, number>();
  let total = 0;
  for (const [id, us] of selfUs) {
    const { functionName, url } = byId.get(id)?.callFrame ?? { functionName: "?", url: "" };
    const key = `${functionName || "(anonymous)"} ${url.split("/").slice(-2).join("/")}`;
    byFunction.set(key, (byFunction.get(key) ?? 0) + us);
    const area = areaOf(url, functionName);
    byArea.set(area, (byArea.get(area) ?? 0) + us);
    total += us;
  }
  const sorted = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]);
  return { totalMs: total / 1000, byArea: sorted(byArea), byFunction: sorted(byFunction) };
}

if (process.argv[1]?.endsWith("profile-summary.ts")) {
  const top = Number(process.argv[3] ?? 30);
  const s = summarise(JSON.parse(readFileSync(process.argv[2], "utf8")) as Profile);
  const pct = (us: number) => `${((us / 1000 / s.totalMs) * 100).toFixed(1)}%`;
  console.log(`total ${s.totalMs.toFixed(0)} ms sampled\n\nby area:`);
  for (const [area, us] of s.byArea) console.log(`  ${pct(us).padStart(6)}  ${area}`);
  console.log(`\ntop ${top} functions (self time):`);
  for (const [fn, us] of s.byFunction.slice(0, top)) console.log(`  ${pct(us).padStart(6)}  ${fn}`);
}
