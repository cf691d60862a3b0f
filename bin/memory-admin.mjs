#!/usr/bin/env node
// The package's `memory-admin` command (`npx memory-admin` in the checkout): cli/memory-admin.ts
// run from its bundle, as `npm start` runs the server (bin/bundle.mjs): about half a second to
// start against 1-2 s through tsx.
import { fileURLToPath } from "node:url";
import { setFlagsFromString } from "node:v8";
import { runEntry } from "./bundle.mjs";

// A command runs a few statements and exits: V8's baseline WebAssembly compiler alone serves the
// embedded database as well, and skips optimising its 9 MB module in the background, which was
// half of a command's CPU (about 0.7 of 1.5 s per command on two cores). The long-running server
// keeps the optimising compiler.
setFlagsFromString("--liftoff-only");

// From the package's directory, as npm runs `npm start`: a relative PGLITE_DIR (the default
// `.data/pglite` too) then names the server's database wherever the command is typed. The
// command reads no other path.
process.chdir(fileURLToPath(new URL("..", import.meta.url)));
await runEntry("cli/memory-admin.ts", "memory-admin");
