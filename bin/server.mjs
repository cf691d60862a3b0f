#!/usr/bin/env node
// `npm start`: the Node.js host (functions/server.ts), run from its bundle (bin/bundle.mjs). A
// stack then names the bundle's lines (each module's code follows a `// <its path>` comment);
// NODE_OPTIONS=--enable-source-maps names the sources instead, for about 40 MB more memory.
import { bundled, unwritable } from "./bundle.mjs";

let entry;
try {
  entry = await bundled("functions/server.ts", "server");
} catch (err) {
  if (!unwritable(err)) throw err;
  // A checkout it cannot write to (a read-only image): from the sources, as tsx loads them.
  process.stderr.write(`Cannot write the bundle (${err.message}): starting from the sources, a few seconds slower.\n`);
  (await import("tsx/esm/api")).register();
  entry = "../functions/server.ts";
}
await import(entry);
