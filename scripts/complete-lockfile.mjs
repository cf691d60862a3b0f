#!/usr/bin/env node
// `npm run lock:complete` after any `npm install` that changes package-lock.json.
//
// Why: the registry this project installs from does not serve some other-platform binaries
// (Biome's and workerd's macOS, Windows and musl builds answer 404). `npm install` skips those
// optional packages silently and leaves them out of package-lock.json, and `npm ci` then refuses
// the lockfile as out of sync. This adds each missing platform package back as an entry with its
// `os`/`cpu` (and `libc`), so `npm ci` accepts the lockfile and skips them on this platform.
import { readFileSync, writeFileSync } from "node:fs";

const file = new URL("../package-lock.json", import.meta.url);
const lock = JSON.parse(readFileSync(file, "utf8"));
const packages = lock.packages;
const PLATFORM = /(android|darwin|linux|win32|windows)-(arm64|x64|64)(-musl)?$/;
const added = [];
for (const [location, meta] of Object.entries(packages)) {
  for (const [dep, version] of Object.entries(meta.optionalDependencies ?? {})) {
    const nested = location ? `${location}/node_modules/${dep}` : `node_modules/${dep}`;
    if (packages[`node_modules/${dep}`] || packages[nested]) continue;
    const m = dep.match(PLATFORM);
    if (!m) continue;
    const entry = {
      version,
      ...(meta.dev ? { dev: true } : {}),
      optional: true,
      os: [m[1] === "windows" ? "win32" : m[1]],
      cpu: [m[2] === "64" ? "x64" : m[2]],
      ...(m[3] ? { libc: ["musl"] } : {}),
    };
    packages[`node_modules/${dep}`] = entry;
    added.push(`${dep}@${version}`);
  }
}
lock.packages = Object.fromEntries(Object.entries(packages).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
writeFileSync(file, `${JSON.stringify(lock, null, 2)}\n`);
console.log(added.length ? `Added ${added.length} platform entries: ${added.join(", ")}` : "Lockfile complete");
