import { uniqueProjectName } from "./names";

/** JSON over HTTP to a running server, as a client would send it. */
export async function callJson(
  baseUrl: string,
  path: string,
  init: { method?: string; token?: string; body?: unknown } = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${baseUrl}${path}`, {
    method: init.method ?? (init.body === undefined ? "GET" : "POST"),
    headers: {
      ...(init.token ? { authorization: `Bearer ${init.token}` } : {}),
      ...(init.body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  return { status: res.status, body: (await res.json().catch(() => ({}))) as Record<string, unknown> };
}

/** Through a running server's own routes: sign in as admin, create a project and an API key for it. */
export async function provisionApiKey(baseUrl: string, adminPassword: string, name = "tenant"): Promise<string> {
  const login = await callJson(baseUrl, "/auth/login", { body: { username: "admin", password: adminPassword } });
  const session = login.body.token as string;
  const project = await callJson(baseUrl, "/dashboard/projects", {
    token: session,
    body: { name: uniqueProjectName(name) },
  });
  const projectId = (project.body.project as { id: string }).id;
  const key = await callJson(baseUrl, "/dashboard/api-keys", {
    token: session,
    body: { name: `${name}-key`, projectId },
  });
  return key.body.key as string;
}
