import { writeFileSync } from "node:fs";
import { createApp } from "../functions/app";
import { OPENAPI_INFO } from "../functions/docs";
import { parseConfig } from "../lib/config";

/** `npm run openapi`: write the OpenAPI 3.1 document (the same one `GET /openapi.json` serves). */
const app = createApp({
  deps: () => {
    throw new Error("no dependencies when generating the document");
  },
  corsOrigins: parseConfig({}).corsOrigins,
});
const document = app.getOpenAPI31Document(OPENAPI_INFO);
const out = process.argv[2] ?? "openapi.json";
writeFileSync(out, `${JSON.stringify(document, null, 2)}\n`);
console.log(`Wrote ${out} (${Object.keys(document.paths ?? {}).length} paths)`);
