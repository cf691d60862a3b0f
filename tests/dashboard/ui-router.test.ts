import { describe, expect, it } from "vitest";
import { afterSignIn, href, parseHash } from "../../ui/src/lib/router";

/** The hash route's parts and query (ui/src/lib/router.ts). */
describe("parseHash", () => {
  it("decodes each path segment", () => {
    expect(parseHash("#/projects/prj_1/data/my%20data%2Fset/threads").parts).toEqual([
      "projects",
      "prj_1",
      "data",
      "my data/set",
      "threads",
    ]);
  });

  it("keeps a segment with a malformed escape as it is, rather than throwing", () => {
    // A truncated UTF-8 escape (a link cut short or edited by hand): decodeURIComponent throws a
    // URIError, which blanked the whole page while rendering.
    expect(parseHash("#/projects/prj_1/data/%E0%A4%A/threads?offset=20")).toEqual({
      parts: ["projects", "prj_1", "data", "%E0%A4%A", "threads"],
      query: new URLSearchParams("offset=20"),
    });
    expect(parseHash("#/projects/%/keys").parts).toEqual(["projects", "%", "keys"]);
  });
});

/** Where the dashboard's sign-in leads (ui/src/lib/router.ts): only to its own hash routes. */
describe("afterSignIn", () => {
  it("returns to a hash route of the app", () => {
    expect(afterSignIn("#/projects/prj_1/data?offset=20")).toBe("#/projects/prj_1/data?offset=20");
  });

  it.each([
    null,
    "",
    "https://evil.example/",
    "//evil.example/",
    "/dashboard/other",
    "javascript:alert(1)",
    "#/sign-in?reason=x",
  ])("goes to the projects for %s", (next) => {
    expect(afterSignIn(next)).toBe("#/projects");
  });

  it("reads back the next= that sign-in's link carries", () => {
    const link = href("sign-in", { reason: "Session has expired", next: "#/projects/prj_1/keys" });
    expect(afterSignIn(parseHash(link).query.get("next"))).toBe("#/projects/prj_1/keys");
  });
});
