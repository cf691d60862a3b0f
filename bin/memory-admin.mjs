#!/usr/bin/env node
// The package's `memory-admin` command (`npx memory-admin` in the checkout): cli/memory-admin.ts
// run from its bundle, as `npm start` runs the server (bin/bundle.mjs): about half a second to
// start against 1-2 s through tsx.
import { runEntry } from "./bundle.mjs";

await runEntry("cli/memory-admin.ts", "memory-admin");
