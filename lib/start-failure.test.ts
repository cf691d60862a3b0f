import { describe, expect, it } from "vitest";
import { parseConfig } from "./config";
import { DirectoryInUseError } from "./db/dir-lock";
import { EmbeddingDimensionsError } from "./llm/embedding-check";
import { startFailureMessage } from "./start-failure";

const thrownBy = (run: () => unknown) => {
  try {
    run();
  } catch (err) {
    return err;
  }
  throw new Error("did not throw");
};

describe("startFailureMessage", () => {
  it("a bad variable: one sentence naming each, never its value", () => {
    const err = thrownBy(() => parseConfig({ PORT: "eighty", ADMIN_PASSWORD: "abc", LOG_LEVEL: "verbose" }));
    const message = startFailureMessage(err);
    expect(message).toBe(
      'Invalid configuration: PORT: expected number, received NaN; ADMIN_PASSWORD: too small: expected string to have >=6 characters; LOG_LEVEL: invalid option: expected one of "error"|"warn"|"info"|"debug" (fix it in the environment, or unset it for its default).',
    );
    expect(message).not.toContain("abc");
    expect(message).not.toContain("\n");
  });

  it("the port in use or refused names PORT and the port", () => {
    const inUse = Object.assign(new Error("listen EADDRINUSE: address already in use 127.0.0.1:8787"), {
      code: "EADDRINUSE",
      port: 8787,
    });
    expect(startFailureMessage(inUse)).toBe(
      "Port 8787 is already in use (another server, or a second `npm start`?): stop it, or set PORT to a free port.",
    );
    expect(startFailureMessage(Object.assign(new Error("listen EACCES"), { code: "EACCES", port: 80 }))).toMatch(
      /^Port 80 needs privileges .*set PORT/,
    );
  });

  it("the data directory held by another server and a wrong embedding size are their own messages", () => {
    expect(startFailureMessage(new DirectoryInUseError("in use: set PGLITE_DIR", "/data"))).toBe(
      "in use: set PGLITE_DIR",
    );
    expect(startFailureMessage(new EmbeddingDimensionsError("EMBEDDING_DIMENSIONS is 1536"))).toBe(
      "EMBEDDING_DIMENSIONS is 1536",
    );
  });

  it("anything else is not a start failure to explain (null: logged with its stack)", () => {
    expect(startFailureMessage(new Error("boom"))).toBeNull();
    expect(startFailureMessage(Object.assign(new Error("x"), { code: "ECONNREFUSED" }))).toBeNull();
    expect(startFailureMessage(undefined)).toBeNull();
  });
});
