import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

/**
 * The Python client's own suite (packages/python/tests, the standard library's unittest) as part
 * of `npm test`: it starts the service itself (tests/serve.ts) and drives it over HTTP. Its
 * output is shown when it fails.
 */
const PACKAGE = fileURLToPath(new URL(".", import.meta.url));

it("passes packages/python's unittest suite", async () => {
  const child = spawn("python3", ["-m", "unittest", "discover", "-s", "tests", "-v"], {
    cwd: PACKAGE,
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d) => {
    output += d;
  });
  child.stderr.on("data", (d) => {
    output += d;
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", resolve);
  });
  expect(code, output).toBe(0);
  expect(output).toMatch(/^OK$/m);
}, 600_000);
