import { describe, expect, it } from "vitest";
import { failureText } from "./errors";

describe("failureText", () => {
  it("names the embedded database's file system errors, plain objects with Emscripten's numbers", () => {
    expect(failureText({ name: "ErrnoError", errno: 2 })).toBe("file system error: permission denied (EACCES)");
    expect(failureText({ name: "ErrnoError", errno: 44 })).toBe(
      "file system error: no such file or directory (ENOENT)",
    );
    expect(failureText({ name: "ErrnoError", errno: 999 })).toBe("file system error: errno 999");
  });

  it("is an error's message, or the value as text", () => {
    expect(failureText(new Error("boom"))).toBe("boom");
    expect(failureText("plain")).toBe("plain");
  });
});
