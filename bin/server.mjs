#!/usr/bin/env node
// `npm start`: the Node.js host (functions/server.ts), run from its bundle (bin/bundle.mjs). A
// stack then names the bundle's lines (each module's code follows a `// <its path>` comment);
// NODE_OPTIONS=--enable-source-maps names the sources instead, for about 40 MB more memory.
import { runEntry } from "./bundle.mjs";

await runEntry("functions/server.ts", "server");
