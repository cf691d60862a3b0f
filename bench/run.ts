import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { PGLITE_SHARED_BUFFERS } from "../lib/db/pglite";
import { parseBenchArgs, UsageError, usage } from "./args";
import { RESULT_MARK } from "./child";
import { type UnitResult, unitLabel, unitsOf } from "./scenarios";
import { leftoverBenchDatabases, redactedUrl, refusalOf, type ServerFacts, serverFacts } from "./server-database";

/**
 * `npm run bench [-- --quick] [-- --facts 1e3,1e4] [-- --only recall] ...` (`-- --help` lists the
 * switches and scenarios): service-time benchmarks of the Node.js host in-process on the
 * embedded database, or with --database-url on a PostgreSQL server (a database of its own per
 * scenario, made and dropped there). Each scenario (at each size) runs in its own process so its
 * peak RSS is its own. Prints a markdown table and writes the results as JSON (--out), `database`
 * saying which database they were measured on.
 * Figures are medians of several runs; nothing here asserts a timing.
 */
let args: ReturnType<typeof parseBenchArgs>;
try {
  args = parseBenchArgs(process.argv.slice(2));
} catch (err) {
  if (!(err instanceof UsageError)) throw err;
  console.error(`${err.message}\n${usage()}`);
  process.exit(2);
}
if (args.help) {
  console.log(usage());
  process.exit(0);
}

const machine = `${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
// The server's URL without its password, wherever the run is written down.
const shown = (text: string) =>
  args.databaseUrl ? text.replaceAll(args.databaseUrl, redactedUrl(args.databaseUrl)) : text;
const command = shown(`npm run bench -- ${process.argv.slice(2).join(" ")}`.trim());
let database: { kind: "pglite"; sharedBuffers: string } | ServerFacts = {
  kind: "pglite",
  sharedBuffers: args.sharedBuffers ?? PGLITE_SHARED_BUFFERS,
};
if (args.databaseUrl) {
  // Refused before any unit starts (each unit checks again before it makes its database).
  const refusal = await refusalOf(args.databaseUrl);
  if (refusal) {
    console.error(refusal);
    process.exit(2);
  }
  database = await serverFacts(args.databaseUrl);
  const leftovers = await leftoverBenchDatabases(args.databaseUrl);
  if (leftovers.length) {
    console.error(`bench: databases of earlier runs are still on the server (not touched): ${leftovers.join(", ")}`);
  }
}
const child = fileURLToPath(new URL("./child.ts", import.meta.url));
type Done = UnitResult & { memory: { rssMiB: number; peakRssMiB: number }; seconds: number };
const done: Done[] = [];
const failed: string[] = [];
const load = [loadavg()[0]];

for (const unit of unitsOf(args)) {
  console.error(`bench: ${unitLabel(unit)} ...`);
  const started = performance.now();
  const run = spawnSync(process.execPath, ["--import", "tsx", child, JSON.stringify({ unit, args })], {
    stdio: ["ignore", "pipe", "inherit"],
    encoding: "utf8",
    maxBuffer: 256 * 2 ** 20,
  });
  const line = run.stdout?.split("\n").find((l) => l.startsWith(RESULT_MARK));
  load.push(loadavg()[0]);
  if (run.status !== 0 || !line) {
    failed.push(`${unitLabel(unit)} (exit ${run.status ?? run.signal})`);
    continue;
  }
  done.push({ ...(JSON.parse(line.slice(RESULT_MARK.length)) as Done), seconds: (performance.now() - started) / 1000 });
}

// The TypeScript client's cost per call over raw fetch (bench/client.ts), in its own process; not
// with --only, nor on a server (it is about the client, not the database).
const clientBench =
  process.argv.some((a) => a === "--only" || a.startsWith("--only=")) || args.databaseUrl
    ? undefined
    : spawnSync(
        process.execPath,
        ["--import", "tsx", fileURLToPath(new URL("./client.ts", import.meta.url)), ...(args.quick ? ["--quick"] : [])],
        { stdio: ["ignore", "pipe", "inherit"], encoding: "utf8" },
      );
if (clientBench && clientBench.status !== 0) failed.push(`client (exit ${clientBench.status ?? clientBench.signal})`);

console.log(
  `\nMachine: ${machine}; load average ${Math.min(...load).toFixed(1)}-${Math.max(...load).toFixed(1)} during the run`,
);
console.log(
  database.kind === "pglite"
    ? `Command: ${command} (embedded PGlite, shared_buffers ${database.sharedBuffers})\n`
    : `Command: ${command} (PostgreSQL ${database.version}, pgvector ${database.pgvector}, ${Object.entries(
        database.settings,
      )
        .map(([k, v]) => `${k} ${v}`)
        .join(", ")})\n`,
);
console.log("| operation | p50 ms | p99 ms | throughput | cost per operation |");
console.log("| --- | --- | --- | --- | --- |");
for (const d of done) for (const row of d.rows) console.log(row);
for (const row of clientBench?.stdout?.split("\n").filter((l) => l.startsWith("| ")) ?? []) console.log(row);
console.log(
  database.kind === "pglite"
    ? "\nMemory per scenario, each in its own process (the Node.js host, its embedded database and the bench's client):\n"
    : "\nMemory per scenario, each in its own process (the Node.js host and the bench's client; the server's processes not counted):\n",
);
console.log("| scenario | peak RSS MiB | RSS at end of measurement MiB | WASM memory MiB |");
console.log("| --- | --- | --- | --- |");
for (const d of done) {
  // recall, hnsw and load report memory before the database closes; the others at exit.
  const inner = (d.result as { memory?: { rssMiB: number; wasmMiB?: number } }).memory;
  console.log(
    `| ${unitLabel(d.unit)} | ${d.memory.peakRssMiB} | ${inner?.rssMiB ?? `${d.memory.rssMiB} (at exit)`} | ${inner?.wasmMiB ?? ""} |`,
  );
  // server-rss: the server process it spawned (its WASM memory as resident, from /proc).
  const server = (d.result as { server?: { peakRssMiB: number; rssMiB: number; wasmMiB: number } }).server;
  if (server)
    console.log(
      `| ${unitLabel(d.unit)}: the server process | ${server.peakRssMiB} | ${server.rssMiB} | ${server.wasmMiB} (resident) |`,
    );
}

const out = resolve(args.out);
mkdirSync(dirname(out), { recursive: true });
const loadAverage = { min: Math.min(...load), max: Math.max(...load) };
writeFileSync(
  out,
  `${JSON.stringify(
    {
      machine,
      date: new Date().toISOString(),
      command,
      loadAverage,
      database,
      args: { ...args, ...(args.databaseUrl ? { databaseUrl: redactedUrl(args.databaseUrl) } : {}) },
      units: done,
      failed,
    },
    null,
    2,
  )}\n`,
);
console.error(`bench: results in ${out}`);
if (failed.length) {
  console.error(`bench: failed: ${failed.join(", ")}`);
  process.exit(1);
}
