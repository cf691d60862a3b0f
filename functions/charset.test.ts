import { describe, expect, it } from "vitest";
import { nonUtf8Charset } from "./charset";

describe("nonUtf8Charset", () => {
  it("is null without a charset or with UTF-8 however it is written", () => {
    for (const ct of [
      undefined,
      "",
      "application/json",
      "application/json; charset=utf-8",
      "application/json;CHARSET=UTF8",
      'application/json; charset="utf-8"',
    ]) {
      expect(nonUtf8Charset(ct), String(ct)).toBeNull();
    }
  });

  it("names another charset, lower-cased, bare or quoted, among other parameters", () => {
    expect(nonUtf8Charset("application/json; charset=ISO-8859-1")).toBe("iso-8859-1");
    expect(nonUtf8Charset('application/json; foo=bar; charset="latin1"; x=y')).toBe("latin1");
    expect(nonUtf8Charset("application/json; charset = utf-16le ")).toBe("utf-16le");
  });
});
