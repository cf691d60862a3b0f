import { describe, expect, it } from "vitest";
import { holderIsAlive, parseLockFile, parseProcStat } from "./dir-lock";

describe("parseLockFile", () => {
  it("reads a pid alone (the old format) or a pid with its start time", () => {
    expect(parseLockFile("1234\n")).toEqual({ pid: 1234 });
    expect(parseLockFile("1234 987654")).toEqual({ pid: 1234, startTime: "987654" });
  });
  it("refuses what is not a pid", () => {
    for (const bad of ["", "abc", "-5", "0", "1.5", "99999999999999999999"]) expect(parseLockFile(bad)).toBeNull();
  });
});

describe("parseProcStat", () => {
  it("finds the state and start time after a command name with spaces and parentheses", () => {
    const rest = Array.from({ length: 40 }, (_, i) => String(i + 4));
    const stat = `4242 (node (my) server) Z 1 ${rest.slice(1).join(" ")}`;
    // Field 22 (start time) counts from 1 at the pid: state is 3, so it is the 20th after the name.
    expect(parseProcStat(stat)).toEqual({ state: "Z", startTime: "22" });
  });
  it("answers null for a truncated line", () => {
    expect(parseProcStat("4242 (node) S 1 2")).toBeNull();
  });
});

describe("holderIsAlive", () => {
  const holder = { pid: 10, startTime: "500" };
  it("is dead when the process does not exist", () => {
    expect(holderIsAlive(holder, undefined, false)).toBe(false);
  });
  it("is dead when the process is a zombie (killed, not yet reaped) or dead", () => {
    expect(holderIsAlive(holder, { state: "Z", startTime: "500" }, true)).toBe(false);
    expect(holderIsAlive(holder, { state: "X", startTime: "500" }, true)).toBe(false);
  });
  it("is dead when the pid now belongs to a process that started at another time", () => {
    expect(holderIsAlive(holder, { state: "S", startTime: "501" }, true)).toBe(false);
  });
  it("is alive when running or sleeping with the same start time, or with no start time recorded", () => {
    expect(holderIsAlive(holder, { state: "S", startTime: "500" }, true)).toBe(true);
    expect(holderIsAlive(holder, { state: "R", startTime: "500" }, true)).toBe(true);
    expect(holderIsAlive({ pid: 10 }, { state: "S", startTime: "1" }, true)).toBe(true);
  });
  it("falls back to the pid's existence where /proc cannot tell", () => {
    expect(holderIsAlive(holder, null, true)).toBe(true);
    expect(holderIsAlive(holder, null, false)).toBe(false);
  });
});
