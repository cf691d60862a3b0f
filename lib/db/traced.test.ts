import { describe, expect, it } from "vitest";
import { operationOf, statementSpan } from "./traced";

describe("statement spans", () => {
  it("are named by the statement's first keyword, with its text and never its values", () => {
    expect(operationOf("  with x AS (SELECT 1) SELECT * FROM x")).toBe("WITH");
    expect(operationOf("(SELECT 1)")).toBe("QUERY");
    const span = statementSpan("INSERT INTO jobs (id) VALUES ($1)");
    expect(span).toEqual({
      name: "INSERT",
      options: {
        kind: "client",
        attributes: {
          "db.system.name": "postgresql",
          "db.operation.name": "INSERT",
          "db.query.text": "INSERT INTO jobs (id) VALUES ($1)",
        },
      },
    });
  });

  it("cut a long text", () => {
    const text = `SELECT ${"x, ".repeat(2000)}1`;
    const cut = statementSpan(text).options.attributes?.["db.query.text"] as string;
    expect(cut.length).toBe(2049);
    expect(cut.endsWith("…")).toBe(true);
  });
});
