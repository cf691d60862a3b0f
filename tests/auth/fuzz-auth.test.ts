import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import {
  type CredentialCase,
  deadCredentials as deadCredentialsOf,
  MISSING,
  makeCredentials,
} from "../helpers/credentials";
import { insertSession, tableCounts } from "../helpers/db-state";
import { documentedRoutes } from "../helpers/openapi";
import { createTestService } from "../helpers/service";

/**
 * Authentication fuzz over every protected route of the OpenAPI document: mutated credentials
 * (truncated, one character altered, extended, re-cased, garbage), dead ones (revoked key,
 * orphaned key, expired, logged-out and orphaned sessions), the other surface's credential and
 * broken headers (no Bearer, misspelled, whitespace). Every case must answer 401 with the spec's
 * exact message for it ("401 messages"), before validation, and write nothing. The route list and
 * each dead or foreign credential on every route, unfuzzed, are in tests/auth/security.test.ts.
 */
const svc = await createTestService({ manualTime: true });
afterAll(() => svc.close());
const clock = svc.clock as NonNullable<typeof svc.clock>;

/** Per route; raise with FUZZ_RUNS for a deep run. */
const NUM_RUNS = Number(process.env.FUZZ_RUNS ?? 30);

// --- Credentials, alive and dead (tests/helpers/credentials.ts) ---------------------------------

const credentials = await makeCredentials(svc, "auth-fuzz");
const { tenant, session, admin } = credentials;

/** An admin session inserted directly (no scrypt), for the logout control. */
async function throwawaySession(): Promise<string> {
  return insertSession(svc.deps.db, admin.id, clock.now());
}

// --- Nothing written: row counts of every table in one statement ---------------------------------

const counts = () => tableCounts(svc.deps.db);

// --- Protected routes, from the app's own OpenAPI document ---------------------------------------

interface Route {
  method: string;
  label: string;
  url: string;
  credential: "apiKey" | "session";
}

const routes: Route[] = (await documentedRoutes(svc)).routes.flatMap(({ method, path, label, op, credential }) => {
  if (credential === null) return [];
  // Placeholder parameters: authentication comes first, so nothing here is ever looked at.
  let url = path;
  const query = new URLSearchParams();
  for (const p of op.parameters ?? []) {
    if (p.in === "path") url = url.replace(`{${p.name}}`, "fz-x");
    else if (p.in === "query" && p.required) query.set(p.name, "fz-x");
  }
  if (query.size > 0) url += `?${query}`;
  return [{ method, label, url, credential }];
});

// --- Cases ---------------------------------------------------------------------------------------

type Case = CredentialCase;

/** The route's own live credential and the 401 message of an unknown one of its kind. */
const own = (route: Route) => (route.credential === "apiKey" ? tenant.key : session);
const unknownMessage = (route: Route) => (route.credential === "apiKey" ? "Invalid API key" : "Invalid session");

/** Dead and foreign credentials, each with the message the route's surface gives for it. */
const deadCredentials = (route: Route): Case[] => deadCredentialsOf(credentials, route.credential);

/** Printable, never whitespace: ASCII and Latin-1 (header values are bytes). */
const tokenChar = fc.oneof(
  fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
  fc.integer({ min: 0xa1, max: 0xff }).map((c) => String.fromCharCode(c)),
);
const tokenText = (minLength: number, maxLength: number) => fc.string({ unit: tokenChar, minLength, maxLength });

/** Whitespace HTTP allows around the token (OWS): the credential's own answer must not change. */
const separator = fc.constantFrom(" ", "  ", "\t", " \t ");
const trailing = fc.constantFrom("", " ", "\t", "   ");
const leading = fc.constantFrom("", " ", "\t");

function credentialCases(route: Route): fc.Arbitrary<Case> {
  const token = own(route);
  const invalid = unknownMessage(route);
  const dead = deadCredentials(route);
  const prefix = route.credential === "apiKey" ? "mk_" : "mk_sess_";
  const recased = [
    token.toUpperCase(),
    `${prefix.toUpperCase()}${token.slice(prefix.length)}`,
    `Mk_${token.slice(3)}`,
    `mK_${token.slice(3)}`,
    ...(route.credential === "session" ? [`mk_SESS_${token.slice(8)}`, `mk_Sess_${token.slice(8)}`] : []),
  ].filter((t) => t !== token);
  const anyToken = fc.oneof(fc.constant(token), fc.constantFrom(...dead.map((c) => c.header?.slice(7) ?? "")));

  return fc.oneof(
    fc
      .integer({ min: 1, max: token.length - 1 })
      .map((n) => ({ name: `truncated to ${n}`, header: `Bearer ${token.slice(0, n)}`, message: invalid })),
    fc
      .tuple(fc.nat({ max: token.length - 1 }), tokenChar)
      .filter(([i, c]) => token[i] !== c)
      .map(([i, c]) => ({
        name: `character ${i} altered`,
        header: `Bearer ${token.slice(0, i)}${c}${token.slice(i + 1)}`,
        message: invalid,
      })),
    fc.tuple(tokenText(1, 20), fc.boolean()).map(([extra, before]) => ({
      name: `${extra.length} characters ${before ? "before" : "after"}`,
      header: `Bearer ${before ? extra + token : token + extra}`,
      message: invalid,
    })),
    fc.constantFrom(...recased).map((t) => ({ name: "re-cased", header: `Bearer ${t}`, message: invalid })),
    tokenText(1, 100)
      .filter((t) => t !== token)
      .map((t) => ({ name: "garbage", header: `Bearer ${t}`, message: invalid })),
    fc.constantFrom(...dead),
    // The same credentials with extra whitespace where HTTP allows it: the answer is unchanged.
    fc.tuple(fc.constantFrom(...dead), leading, separator, trailing).map(([c, lead, sep, trail]) => ({
      ...c,
      name: `${c.name}, spaced`,
      header: `${lead}Bearer${sep}${c.header?.slice(7)}${trail}`,
    })),
    // Whitespace inside the token: a Bearer header whose credential is simply unknown.
    fc.tuple(anyToken, fc.nat(), fc.constantFrom(" ", "\t", "  ")).map(([t, at, ws]) => {
      const i = 1 + (at % (t.length - 1));
      return {
        name: "whitespace inside the token",
        header: `Bearer ${t.slice(0, i)}${ws}${t.slice(i)}`,
        message: invalid,
      };
    }),
    // Two credentials in one header (or two headers joined): the same.
    fc
      .tuple(
        anyToken,
        fc.constantFrom(
          (t: string) => `Bearer ${t} ${t}`,
          (t: string) => `Bearer ${t}, Bearer ${t}`,
          (t: string) => `Bearer ${t}\t${t}`,
        ),
      )
      .map(([t, format]) => ({ name: "two credentials", header: format(t), message: invalid })),
    // No usable header: missing, empty, no Bearer, misspelled scheme, scheme without token.
    fc.constant({ name: "no header", header: undefined, message: MISSING }),
    fc
      .tuple(
        anyToken,
        fc.constantFrom(
          (t: string) => t,
          (t: string) => `Basic ${t}`,
          (t: string) => `Token ${t}`,
          (t: string) => `Baerer ${t}`,
          (t: string) => `Bearr ${t}`,
          (t: string) => `Bearerr ${t}`,
          (t: string) => `Bearer: ${t}`,
          (t: string) => `Bearer=${t}`,
          (t: string) => `Bearer${t}`,
          () => "",
          () => "Bearer",
          () => "Bearer ",
          () => "Bearer \t ",
        ),
      )
      .map(([t, format]) => ({ name: "no usable Bearer header", header: format(t), message: MISSING })),
  );
}

// --- Sending and checking ------------------------------------------------------------------------

async function expect401(route: Route, c: Case) {
  const headers: Record<string, string> = {};
  if (c.header !== undefined) headers.authorization = c.header;
  // A JSON body the route would reject: a 401 proves authentication ran before validation.
  const body = route.method === "GET" ? undefined : JSON.stringify({ junk: true });
  if (body) headers["content-type"] = "application/json";
  const before = await counts();
  const res = await svc.app.request(route.url, { method: route.method, headers, body });
  const text = await res.text();
  const where = `${route.label} with ${c.name}: ${JSON.stringify(c.header)}`;
  expect({ status: res.status, body: text }, where).toEqual({
    status: 401,
    body: JSON.stringify({ error: c.message }),
  });
  expect(res.headers.get("content-type"), where).toMatch(/^application\/json/);
  expect(await counts(), `${where}: a 401 writes nothing`).toEqual(before);
}

describe.each(routes)("$label", (route) => {
  it("answers fuzzed credentials and headers with the spec's exact 401 message", async () => {
    await fc.assert(
      fc.asyncProperty(credentialCases(route), (c) => expect401(route, c)),
      { numRuns: NUM_RUNS },
    );
  });

  // Control: the live credential, spaced the same ways, does authenticate (logout ends its own).
  it("accepts its live credential with optional whitespace", async () => {
    await fc.assert(
      fc.asyncProperty(leading, separator, trailing, async (lead, sep, trail) => {
        const token = route.label === "POST /auth/logout" ? await throwawaySession() : own(route);
        const res = await svc.app.request(route.url, {
          method: route.method,
          headers: { authorization: `${lead}Bearer${sep}${token}${trail}`, "content-type": "application/json" },
          body: route.method === "GET" ? undefined : JSON.stringify({ junk: true }),
        });
        // Past authentication (no provider is configured here, so search may fail later on).
        expect({ route: route.label, status: res.status }).not.toEqual({ route: route.label, status: 401 });
      }),
      { numRuns: 4 },
    );
  });
});
