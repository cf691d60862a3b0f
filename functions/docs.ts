import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "./env";
import { createRouter } from "./router";

export const OPENAPI_INFO = {
  openapi: "3.1.0",
  info: {
    title: "Conversational Memory Service",
    version: "0.1.0",
    description:
      "Memory for chat applications: threads and messages, episodes, facts and recall. `/v1/*` is the integration surface (API key); routes tagged Internal serve the dashboard (session token) and may change without notice.",
  },
};

/** `GET /openapi.json`: generated from the same zod schemas that validate requests. */
export function registerOpenApi(app: OpenAPIHono<AppEnv>) {
  app.openAPIRegistry.registerComponent("securitySchemes", "apiKey", {
    type: "http",
    scheme: "bearer",
    description: "API key (`mk_` + 64 hex characters) for `/v1/*`.",
  });
  app.openAPIRegistry.registerComponent("securitySchemes", "session", {
    type: "http",
    scheme: "bearer",
    description: "Dashboard session token from `POST /auth/login`.",
  });
  app.doc31("/openapi.json", OPENAPI_INFO);
}

/**
 * `GET /docs`: an API reference rendered in the browser from /openapi.json. Self-contained
 * (no third-party script), so it works on an offline network.
 */
export const docsRoutes = createRouter().get("/docs", (c) => c.html(DOCS_HTML));

const DOCS_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>API reference · Conversational Memory Service</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1b1f24;background:#fafafa}
main{max-width:960px;margin:0 auto;padding:24px}
h1{font-size:24px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}
details{background:#fff;border:1px solid #e3e3e3;border-radius:6px;margin:8px 0;padding:8px 12px}
summary{cursor:pointer;font-family:ui-monospace,monospace}
.m{display:inline-block;min-width:64px;font-weight:700}
.get{color:#0a7}.post{color:#07c}.patch{color:#a60}.delete{color:#c33}
pre{background:#f3f3f3;padding:8px;overflow:auto;font-size:12px}
</style></head><body><main><h1>API reference</h1><p id="intro">Loading <a href="/openapi.json">/openapi.json</a>…</p><div id="ops"></div></main>
<script>
fetch('/openapi.json').then(r=>r.json()).then(doc=>{
  document.getElementById('intro').textContent=doc.info.description;
  const byTag={};
  for(const [path,item] of Object.entries(doc.paths))for(const [method,op] of Object.entries(item)){
    const tag=(op.tags&&op.tags[0])||'Other';(byTag[tag]=byTag[tag]||[]).push({path,method,op});}
  const esc=s=>String(s).replace(/[&<>]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;'}[c]));
  let html='';
  for(const [tag,ops] of Object.entries(byTag)){html+='<h2>'+esc(tag)+'</h2>';
    for(const {path,method,op} of ops){html+='<details><summary><span class="m '+method+'">'+method.toUpperCase()+'</span>'+esc(path)+' — '+esc(op.summary||'')+'</summary>'
      +(op.description?'<p>'+esc(op.description)+'</p>':'')
      +'<pre>'+esc(JSON.stringify({parameters:op.parameters,requestBody:op.requestBody,responses:op.responses},null,2))+'</pre></details>';}}
  document.getElementById('ops').innerHTML=html;
});
</script></body></html>`;
