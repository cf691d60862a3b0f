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

  it("a database it cannot reach or open: named, with what to check; another file's error is not one", () => {
    const server = { databaseUrl: "postgres://u:secret@db.example:5432/memory", pgliteDir: ".data/pglite" };
    const refused = new AggregateError([Object.assign(new Error(""), { code: "ECONNREFUSED" })], "");
    const wrapped = new Error("Failed query", { cause: refused });
    expect(startFailureMessage(wrapped, server)).toBe(
      "Cannot open the database at DATABASE_URL (db.example:5432/memory): ECONNREFUSED; check that the server is running and that DATABASE_URL names it, its database and credentials.",
    );
    const noDatabase = Object.assign(new Error('database "memory" does not exist'), { code: "3D000" });
    expect(startFailureMessage(noDatabase, server)).toMatch(
      /^Cannot open the database at DATABASE_URL .*does not exist;/,
    );
    const embedded = { databaseUrl: undefined, pgliteDir: "/proc/nope" };
    const lock = Object.assign(new Error("ENOENT: no such file or directory, open '/proc/nope.lock'"), {
      code: "ENOENT",
      path: "/proc/nope.lock",
    });
    expect(startFailureMessage(lock, embedded)).toMatch(
      /^Cannot open the embedded database at \/proc\/nope: .*the lock file \/proc\/nope\.lock goes beside it\)\.$/,
    );
    // Creating the directory failed at a parent of it: the same sentence, not a stack.
    const parent = Object.assign(new Error("EACCES: permission denied, mkdir '/srv/ro/sub'"), {
      code: "EACCES",
      path: "/srv/ro/sub",
    });
    expect(startFailureMessage(parent, { databaseUrl: undefined, pgliteDir: "/srv/ro/sub/db" })).toMatch(
      /^Cannot open the embedded database at \/srv\/ro\/sub\/db: /,
    );
    expect(startFailureMessage(parent, { databaseUrl: undefined, pgliteDir: "/srv/ro/subway" })).toBeNull();
    // A file of the service's own (a migration), or a network code for the embedded database: a bug, with its stack.
    const migration = Object.assign(new Error("ENOENT"), { code: "ENOENT", path: "/app/migrations/0001.sql" });
    expect(startFailureMessage(migration, embedded)).toBeNull();
    expect(startFailureMessage(migration, server)).toBeNull();
    expect(startFailureMessage(Object.assign(new Error("x"), { code: "ECONNREFUSED" }), embedded)).toBeNull();
  });
});
