import { DrizzleQueryError } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { failureText } from "./errors";
import { errorFields } from "./log";

describe("errorFields", () => {
  it("logs a failed statement and its cause without its parameters' values", () => {
    const cause = new Error("canceling statement due to lock timeout");
    const err = new DrizzleQueryError(
      "insert into messages (content) values ($1), ($2)",
      ["My card PIN is 4321", "second\n    at line"],
      cause,
    );
    const fields = errorFields(err);
    const logged = JSON.stringify(fields);
    expect(logged).not.toContain("4321");
    expect(logged).not.toContain("second");
    expect(fields.error).toBe(
      "Failed query: insert into messages (content) values ($1), ($2)\n(2 parameters, not logged)",
    );
    expect(fields.cause).toBe("canceling statement due to lock timeout");
    expect(String(fields.stack)).toMatch(
      /^Error: Failed query: insert into messages[^\n]*\n\(2 parameters, not logged\)\n\s+at /,
    );
    // A wrapped one is redacted too.
    const wrapper = new Error("could not store", { cause: err });
    expect(JSON.stringify(errorFields(wrapper))).not.toContain("4321");
  });

  it("leaves out a stack it cannot redact, and a stored failure names no parameter either", () => {
    const err = new DrizzleQueryError("select $1", ["secret words"]);
    err.stack = "some other header\nparams: secret words\n    at somewhere";
    expect(JSON.stringify(errorFields(err))).not.toContain("secret");
    // What a job stores as its last error (shown in the dashboard), with a cause or without one.
    expect(failureText(err)).toBe("Database error: the statement failed");
    const withCause = new DrizzleQueryError("select $1", ["secret words"], new Error("deadlock detected"));
    expect(failureText(withCause)).toBe("Database error: deadlock detected");
  });

  it("keeps any other error's message and stack as they are", () => {
    const err = new Error("boom");
    expect(errorFields(err)).toEqual({ error: "boom", stack: err.stack });
  });
});
