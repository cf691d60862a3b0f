import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

/**
 * The repository stands alone: every relative link and anchor in its user-facing markdown resolves
 * to a file (and a heading, by GitHub's slug rules) inside the repository, and nothing points
 * outside it. The README stays a short guide: at most 300 lines, none over 200 characters.
 * Every environment variable the service reads has a row in the configuration reference.
 */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** The markdown files whose links are checked, relative to `root`. */
function markdownFiles(root: string): string[] {
  const inDir = (dir: string) =>
    existsSync(join(root, dir))
      ? readdirSync(join(root, dir))
          .filter((f) => f.endsWith(".md"))
          .map((f) => `${dir}/${f}`)
      : [];
  const readmes = (dir: string) =>
    existsSync(join(root, dir))
      ? readdirSync(join(root, dir), { withFileTypes: true })
          .filter((d) => d.isDirectory() && existsSync(join(root, dir, d.name, "README.md")))
          .map((d) => `${dir}/${d.name}/README.md`)
      : [];
  return [
    ...["README.md", "SECURITY.md", "ARCHITECTURE.md", "CHANGELOG.md"].filter((f) => existsSync(join(root, f))),
    ...inDir("docs"),
    ...readmes("packages"),
    ...readmes("examples"),
  ];
}

/** Lines outside fenced code blocks (``` or ~~~), with their 1-based numbers. */
function proseLines(text: string): { line: string; n: number }[] {
  const out: { line: string; n: number }[] = [];
  let fence: string | undefined;
  text.split("\n").forEach((line, i) => {
    const m = /^\s*(`{3,}|~{3,})/.exec(line);
    if (m) {
      if (fence === undefined) fence = m[1];
      else if (m[1].startsWith(fence)) fence = undefined;
      return;
    }
    if (fence === undefined) out.push({ line, n: i + 1 });
  });
  return out;
}

/** GitHub's heading anchor: lower case, punctuation dropped (not `-` or `_`), spaces as hyphens. */
function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1") // links and images: their text
    .replace(/<[^>]+>/g, "") // inline HTML tags
    .replace(/[`*]/g, "")
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, "").replace(/ /g, "-");
}

/** Every anchor a markdown file offers: its headings' slugs (repeats numbered as GitHub does), and HTML ids. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const { line } of proseLines(text)) {
    const h = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (h) {
      const base = slug(h[1]);
      const count = seen.get(base) ?? 0;
      seen.set(base, count + 1);
      out.add(count === 0 ? base : `${base}-${count}`);
    }
    for (const m of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) out.add(m[1]);
  }
  return out;
}

/** The link targets of a markdown file (inline links, images and reference definitions), outside code. */
function links(text: string): { target: string; n: number }[] {
  const out: { target: string; n: number }[] = [];
  for (const { line, n } of proseLines(text)) {
    const prose = line.replace(/`[^`]*`/g, "``");
    for (const m of prose.matchAll(/\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g)) out.push({ target: m[1], n });
    const ref = /^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(prose);
    if (ref) out.push({ target: ref[1], n });
  }
  return out;
}

/** Every broken or escaping link in `files` (relative to `root`), as "file:line: target: why". */
function checkLinks(root: string, files: string[]): string[] {
  const problems: string[] = [];
  const cache = new Map<string, Set<string>>();
  const anchorsOf = (file: string) => {
    let a = cache.get(file);
    if (!a) {
      a = anchors(readFileSync(file, "utf8"));
      cache.set(file, a);
    }
    return a;
  };
  for (const file of files) {
    const abs = join(root, file);
    for (const { target, n } of links(readFileSync(abs, "utf8"))) {
      const where = `${file}:${n}: ${target}`;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: and the like
      if (target === "") {
        problems.push(`${where}: empty link`);
        continue;
      }
      const hash = target.indexOf("#");
      const pathPart = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
      const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
      const resolved =
        pathPart === "" ? abs : pathPart.startsWith("/") ? join(root, pathPart) : resolve(dirname(abs), pathPart);
      const inside = relative(root, resolved);
      if (inside.startsWith("..") || isAbsolute(inside)) {
        problems.push(`${where}: leaves the repository`);
        continue;
      }
      if (!existsSync(resolved)) {
        problems.push(`${where}: no such file`);
        continue;
      }
      if (anchor !== undefined && resolved.endsWith(".md") && !anchorsOf(resolved).has(anchor)) {
        problems.push(`${where}: no heading #${anchor} in ${relative(root, resolved)}`);
      }
    }
  }
  return problems;
}

describe("links in the repository's markdown", () => {
  const files = markdownFiles(ROOT);

  it("covers the README, docs, SECURITY, ARCHITECTURE, CHANGELOG and the package and example READMEs", () => {
    for (const f of ["README.md", "SECURITY.md", "ARCHITECTURE.md", "CHANGELOG.md", "docs/configuration.md"]) {
      expect(files).toContain(f);
    }
    expect(files.some((f) => f.startsWith("packages/"))).toBe(true);
    expect(files.some((f) => f.startsWith("examples/"))).toBe(true);
  });

  it("every relative link and anchor resolves inside the repository", () => {
    expect(checkLinks(ROOT, files)).toEqual([]);
  });

  it("every docs page is reachable from the README", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const linked = new Set(links(readme).map((l) => l.target.split("#")[0]));
    const pages = files.filter((f) => f.startsWith("docs/"));
    expect(pages.filter((p) => !linked.has(p))).toEqual([]);
  });

  it("nothing points at the specification outside the repository", () => {
    const sources = [
      ...files,
      ...["functions", "lib", "scripts"].flatMap((dir) =>
        (readdirSync(join(ROOT, dir), { recursive: true }) as string[])
          .filter((f) => f.endsWith(".ts"))
          .map((f) => `${dir}/${f}`),
      ),
    ];
    const outside = sources.filter((f) => /\.\.\/shared\b|shared\/spec\b/.test(readFileSync(join(ROOT, f), "utf8")));
    expect(outside).toEqual([]);
  });

  it("the README is a short guide: at most 300 lines, none over 200 characters", () => {
    const lines = readFileSync(join(ROOT, "README.md"), "utf8").trimEnd().split("\n");
    expect(lines.length).toBeLessThanOrEqual(300);
    expect(lines.map((l, i) => ({ line: i + 1, length: l.length })).filter((l) => l.length > 200)).toEqual([]);
  });

  it("every environment variable of lib/config.ts has a row in docs/configuration.md", () => {
    const config = readFileSync(join(ROOT, "lib/config.ts"), "utf8");
    const schema = config.slice(config.indexOf("configSchema"));
    const names = [...schema.matchAll(/^ {2}([A-Z][A-Z0-9_]+):/gm)].map((m) => m[1]);
    expect(names).toContain("DATABASE_URL");
    expect(names.length).toBeGreaterThan(20);
    const reference = readFileSync(join(ROOT, "docs/configuration.md"), "utf8");
    const rows = new Set([...reference.matchAll(/^\|\s*`([A-Z][A-Z0-9_]+)`\s*\|/gm)].map((m) => m[1]));
    expect(names.filter((n) => !rows.has(n))).toEqual([]);
  });
});

describe("the link check itself", () => {
  const dir = mkdtempSync(join(tmpdir(), "memsvc-links-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("follows GitHub's slug rules", () => {
    expect(slug("Edge dev (`npm run dev`)")).toBe("edge-dev-npm-run-dev");
    expect(slug("Durability: what an acknowledged write means")).toBe("durability-what-an-acknowledged-write-means");
    expect(slug("Main table (2026-11-27)")).toBe("main-table-2026-11-27");
    expect(slug("The reference at `/docs`")).toBe("the-reference-at-docs");
  });

  it("reports a missing file, a missing heading and a link out of the repository, and passes good links", () => {
    writeFileSync(
      join(dir, "a.md"),
      [
        "# Title",
        "## Part one",
        "## Part one",
        "[ok](b.md#section-two) [ok](#part-one) [ok](#part-one-1) [ok](https://example.com/x)",
        "[gone](missing.md) [bad anchor](b.md#nope) [out](../shared/spec/x.md) [self](#nowhere)",
        "`[in code](missing-too.md)`",
        "```",
        "[in a fence](missing-three.md)",
        "```",
      ].join("\n"),
    );
    writeFileSync(join(dir, "b.md"), "# B\n\n## Section two\n");
    const problems = checkLinks(dir, ["a.md", "b.md"]);
    expect(problems).toEqual([
      "a.md:5: missing.md: no such file",
      "a.md:5: b.md#nope: no heading #nope in b.md",
      "a.md:5: ../shared/spec/x.md: leaves the repository",
      "a.md:5: #nowhere: no heading #nowhere in a.md",
    ]);
  });
});
