#!/usr/bin/env node
// The package's `memory-admin` command (`npx memory-admin` in the checkout): the TypeScript
// entry, loaded through tsx as `npm start` loads the server.
import { register } from "tsx/esm/api";

register();
await import("../cli/memory-admin.ts");
