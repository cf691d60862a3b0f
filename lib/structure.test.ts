import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * How lib/ holds together. Its folders import each other one way: no loop between folders (a file
 * at lib/'s root is a folder of its own here), counting type-only imports too: a type a folder
 * borrows from another ties the two as surely as a value does (lib/episodic and lib/semantic once
 * named each other's types and the check did not see it). One exception: lib/deps.ts, the Deps
 * interface every folder takes. It is the service's wiring, naming a type of each part it wires
 * (the job registry, the doorbell, the model client), and holds no code: an import of it is left
 * out, while its own imports count. lib/ is the domain: the transports (Hono, the MCP SDK) stay
 * in functions/.
 */
const LIB = import.meta.dirname;
const IMPORT = /^(?:import|export)\s+([^;]*?)\s+from\s+"(\.[^"]+)"/gm;
/** Every import of a package (not a relative path): `import … from "x"`, `import "x"`, `import("x")`. */
const PACKAGE_IMPORT = /(?:^(?:import|export)\s[^;]*?\bfrom\s+|^import\s+|\bimport\()\s*"([^."][^"]*)"/gm;

/** lib/jobs/runner.ts → "jobs"; lib/threads.ts → "threads.ts". */
const unitOf = (file: string) => relative(LIB, file).split(sep)[0];

function filesOf(dir: string, keep: (name: string) => boolean): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return filesOf(path, keep);
    return keep(entry.name) ? [path] : [];
  });
}

/** lib/'s sources, its unit tests left out. */
const sources = (dir: string) => filesOf(dir, (name) => name.endsWith(".ts") && !name.endsWith(".test.ts"));
/** lib/'s unit tests. */
const tests = (dir: string) => filesOf(dir, (name) => name.endsWith(".test.ts"));

/** Whether an import clause brings in a value (not `import type …`, not only `{ type A, type B }`). */
function importsValue(clause: string): boolean {
  if (/^type\s/.test(clause)) return false;
  const named = clause.match(/^\{([\s\S]*)\}$/);
  if (!named) return true;
  const names = named[1]
    .split(",")
    .map((n) => n.trim())
    .filter(Boolean);
  return names.some((n) => !n.startsWith("type "));
}

/** The wiring every folder takes (see above): imports of it are not edges. */
const WIRING = "deps.ts";

/** Folder → the folders its files import from: types too, or (`types: false`) values only. */
function folderGraph(options: { types: boolean } = { types: true }): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const file of sources(LIB)) {
    for (const [, clause, specifier] of readFileSync(file, "utf8").matchAll(IMPORT)) {
      const target = resolve(dirname(file), specifier);
      if (relative(LIB, target).startsWith("..")) continue;
      if (!options.types && !importsValue(clause.trim())) continue;
      const [from, to] = [unitOf(file), unitOf(target.endsWith(".ts") ? target : `${target}.ts`)];
      if (from === to || to === WIRING) continue;
      graph.set(from, (graph.get(from) ?? new Set()).add(to));
    }
  }
  return graph;
}

/** The strongly connected components of more than one node (Tarjan): each is a loop. */
function loops(graph: Map<string, Set<string>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v) as number);
    stack.push(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (stack.includes(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop() as string;
      component.push(w);
    } while (w !== v);
    if (component.length > 1) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

/** The packages `source` imports (`node:fs`, `drizzle-orm`, `@modelcontextprotocol/sdk/types.js`…). */
function packagesOf(source: string): string[] {
  return [...source.matchAll(PACKAGE_IMPORT)].map((m) => m[1]);
}

/** Whether `specifier` is `pkg` or one of its subpaths (`hono/http-exception` is hono's). */
const isOf = (specifier: string, pkg: string) => specifier === pkg || specifier.startsWith(`${pkg}/`);

describe("lib/ structure", () => {
  it("has no loop between folders, type-only imports included", () => {
    expect(loops(folderGraph({ types: false }))).toEqual([]);
    expect(loops(folderGraph({ types: true }))).toEqual([]);
  });

  it("imports nothing from the floors above it (functions/, dev/, scripts/, tests/…)", () => {
    const upward = sources(LIB).flatMap((file) =>
      [...readFileSync(file, "utf8").matchAll(IMPORT)]
        .map(([, , specifier]) => relative(LIB, resolve(dirname(file), specifier)))
        .filter((target) => target.startsWith(".."))
        .map((target) => `${relative(LIB, file)}: ${target}`),
    );
    expect(upward).toEqual([]);
  });

  it("imports no transport: neither the MCP SDK nor Hono (functions/ has them)", () => {
    const transports = ["@modelcontextprotocol", "hono", "@hono"];
    // This file is left out: its own check below spells out such imports as strings.
    const files = [...sources(LIB), ...tests(LIB)].filter((file) => file !== import.meta.filename);
    const offenders = files.flatMap((file) =>
      packagesOf(readFileSync(file, "utf8"))
        .filter((specifier) => transports.some((pkg) => isOf(specifier, pkg)))
        .map((specifier) => `${relative(LIB, file)}: ${specifier}`),
    );
    expect(offenders).toEqual([]);
  });

  it("lib/jobs runs jobs without knowing what they do: it imports no folder that fills its registry", () => {
    const jobs = [...(folderGraph().get("jobs") ?? [])];
    const owners = ["pipeline", "episodic", "semantic", "evidence", "webhooks", "background.ts"];
    expect(jobs.filter((unit) => owners.includes(unit))).toEqual([]);
  });

  it("lib/jobs knows no domain table: of the schema it names only the jobs table", () => {
    const fromSchema = /import\s+(?:type\s+)?\{([^}]*)\}\s+from\s+"\.\.\/db\/schema"/g;
    const named = sources(join(LIB, "jobs")).flatMap((file) =>
      [...readFileSync(file, "utf8").matchAll(fromSchema)].flatMap(([, names]) =>
        names.split(",").map((n) => n.trim()),
      ),
    );
    expect([...new Set(named.filter(Boolean))]).toEqual(["jobs"]);
  });

  it("an episode's pipeline (lib/pipeline) imports episodic and semantic, which import neither it nor each other", () => {
    const graph = folderGraph();
    expect([...(graph.get("pipeline") ?? [])]).toEqual(expect.arrayContaining(["episodic", "semantic"]));
    for (const [from, to] of [
      ["episodic", "semantic"],
      ["semantic", "episodic"],
      ["episodic", "pipeline"],
      ["semantic", "pipeline"],
    ]) {
      expect(graph.get(from)?.has(to) ?? false, `${from} imports ${to}`).toBe(false);
    }
  });

  it("has one statement that writes job rows (lib/jobs/schedule.ts); every other caller embeds it", () => {
    const writers = sources(LIB).filter((file) => /INSERT INTO \$\{jobs\}/.test(readFileSync(file, "utf8")));
    expect(writers.map((file) => relative(LIB, file))).toEqual([join("jobs", "schedule.ts")]);
  });

  it("finds a loop and tells type-only imports from value imports (the check itself)", () => {
    const graph = new Map([
      ["a", new Set(["b"])],
      ["b", new Set(["c"])],
      ["c", new Set(["a"])],
      ["d", new Set(["a"])],
    ]);
    expect(loops(graph)).toEqual([["a", "b", "c"]]);
    expect(loops(new Map([["a", new Set(["b"])]]))).toEqual([]);
    expect(importsValue("type { Deps }")).toBe(false);
    expect(importsValue("{ type Deps, type Job }")).toBe(false);
    expect(importsValue("{ type Deps, runJob }")).toBe(true);
    expect(importsValue("* as schema")).toBe(true);
  });

  it("finds a package however it is imported (the check itself)", () => {
    const source = [
      'import { Server } from "@modelcontextprotocol/sdk/server/index.js";',
      'import type { Context } from "hono";',
      'export { z } from "@hono/zod-openapi";',
      'import "hono/jsx";',
      'const lazy = await import("hono/http-exception");',
      'import { sql } from "drizzle-orm";',
      'import { x } from "./honor";',
    ].join("\n");
    expect(packagesOf(source)).toEqual([
      "@modelcontextprotocol/sdk/server/index.js",
      "hono",
      "@hono/zod-openapi",
      "hono/jsx",
      "hono/http-exception",
      "drizzle-orm",
    ]);
    expect(isOf("hono/http-exception", "hono")).toBe(true);
    expect(isOf("honors", "hono")).toBe(false);
  });
});
