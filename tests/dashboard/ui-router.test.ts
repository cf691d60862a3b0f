import { describe, expect, it } from "vitest";
import { afterSignIn, href, parseHash } from "../../ui/src/lib/router";

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
