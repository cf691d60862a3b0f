import { mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/**
 * One of the repository's TypeScript entries bundled with every package it imports (but the
 * embedded database's, which loads its own files) into dist/node/<name>.mjs by esbuild, the
 * compiler tsx itself uses; returns the bundle's URL to import. A process loading the bundle
 * starts about three times faster than through tsx's loader, which resolves and compiles each of
 * ~1,270 modules one by one at every start.
 *
 * Built again only when a file it was built from changed (their modification times are kept
 * beside it, checked in a few milliseconds), so an edited source always runs. Each file is
 * written under a name of its own and renamed into place: processes starting at once never read
 * a half-written bundle. One of them builds it (holding a lock file) while the others wait and
 * then load it: twelve `memory-admin` commands started at once in a fresh checkout each built
 * their own, 21 s for all against 2 s for one. `onBuild` hears when this process built it.
 */
export async function bundled(entry, name, onBuild) {
  const out = join(ROOT, "dist", "node", `${name}.mjs`);
  const inputsFile = `${out}.inputs.json`;
  if (!upToDate(inputsFile)) {
    await holdingLock(`${out}.lock`, async () => {
      // Built by another process while this one waited for the lock.
      if (upToDate(inputsFile)) return;
      await build(entry, out, inputsFile);
      onBuild?.();
    });
  }
  return pathToFileURL(out).href;
}

/** A lock older than this was left by a build that never ended (esbuild takes 2 s). */
const LOCK_STALE_MS = 60_000;

/**
 * Runs `work` while this process holds `lockFile` (created exclusively, its PID inside), waiting
 * for another holder to remove it. A lock whose process is gone, or older than LOCK_STALE_MS, is
 * taken over. Creating it fails on a checkout this process cannot write to, as the build would.
 */
async function holdingLock(lockFile, work) {
  mkdirSync(dirname(lockFile), { recursive: true });
  for (;;) {
    try {
      writeFileSync(lockFile, String(process.pid), { flag: "wx" });
      break;
    } catch (err) {
      if (err?.code !== "EEXIST") throw err;
      if (abandoned(lockFile)) rmSync(lockFile, { force: true });
      else await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  try {
    await work();
  } finally {
    rmSync(lockFile, { force: true });
  }
}

/** The lock's process is gone, or it has been held too long (gone already: not abandoned). */
function abandoned(lockFile) {
  try {
    if (Date.now() - statSync(lockFile).mtimeMs > LOCK_STALE_MS) return true;
    const pid = Number(readFileSync(lockFile, "utf8"));
    // Just created, its PID not written yet.
    if (!pid) return false;
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return err?.code === "ESRCH";
  }
}

/**
 * Runs one of the repository's TypeScript entries (`npm start`'s server, the `memory-admin`
 * command) from its bundle; from a checkout it cannot write to (a read-only image), from the
 * sources through tsx instead, a few seconds slower, saying so on stderr.
 */
export async function runEntry(entry, name) {
  let url;
  try {
    url = await bundled(entry, name);
  } catch (err) {
    if (!unwritable(err)) throw err;
    process.stderr.write(
      `Cannot write the bundle (${err.message}): starting from the sources, a few seconds slower.\n`,
    );
    (await import("tsx/esm/api")).register();
    url = pathToFileURL(join(ROOT, entry)).href;
  }
  await import(url);
}

/** The bundle could not be written: the checkout is read-only to this process. */
function unwritable(err) {
  return ["EACCES", "EPERM", "EROFS"].includes(err?.code);
}

/** Every input the bundle was built from is there with the modification time it had then. */
function upToDate(inputsFile) {
  let inputs;
  try {
    inputs = JSON.parse(readFileSync(inputsFile, "utf8"));
  } catch {
    return false;
  }
  for (const [file, mtimeMs] of Object.entries(inputs)) {
    try {
      if (statSync(file).mtimeMs !== mtimeMs) return false;
    } catch {
      return false;
    }
  }
  return true;
}

async function build(entry, out, inputsFile) {
  const esbuild = await import("esbuild");
  mkdirSync(dirname(out), { recursive: true });
  const result = await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: [join(ROOT, entry)],
    outfile: out,
    write: false,
    metafile: true,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node22",
    external: ["@electric-sql/*"],
    sourcemap: "linked",
    logLevel: "warning",
    // A package written as CommonJS calls require(); an ES module has none of its own.
    banner: {
      js: 'import { createRequire as __bundleRequire } from "node:module"; const require = __bundleRequire(import.meta.url);',
    },
    plugins: [sourceImportMetaUrl],
  });
  const sources = [...Object.keys(result.metafile.inputs), fileURLToPath(import.meta.url)];
  const inputs = Object.fromEntries(
    sources.map((file) => resolve(ROOT, file)).map((file) => [file, statSync(file).mtimeMs]),
  );
  for (const file of result.outputFiles) writeAtomically(file.path, file.contents);
  writeAtomically(inputsFile, JSON.stringify(inputs));
}

function writeAtomically(path, contents) {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, contents);
  renameSync(tmp, path);
}

/**
 * `import.meta.url` in the repository's own sources keeps meaning the source file, so a path
 * beside it (the migrations folder, the dashboard's build) resolves in the bundle as from source.
 */
const sourceImportMetaUrl = {
  name: "source-import-meta-url",
  setup(build) {
    build.onLoad({ filter: /\.ts$/ }, (args) => {
      if (args.path.includes("/node_modules/")) return undefined;
      const text = readFileSync(args.path, "utf8");
      if (!text.includes("import.meta.url")) return undefined;
      return {
        contents: text.replaceAll("import.meta.url", JSON.stringify(pathToFileURL(args.path).href)),
        loader: "ts",
      };
    });
  },
};
