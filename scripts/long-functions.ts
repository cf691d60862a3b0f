import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";

/**
 * `node --import tsx scripts/long-functions.ts [dir] [limit]`: every function in `dir` (lib/ by
 * default, tests left out) longer than `limit` lines (60), longest first. Lines run from the
 * declaration's first line to its closing brace, as an editor shows them.
 */
const root = process.argv[2] ?? "lib";
const limit = Number(process.argv[3] ?? 60);

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return /\.tsx?$/.test(entry.name) && !/\.test\.tsx?$/.test(entry.name) ? [path] : [];
  });
}

/** A function's name: its own, or the variable, property or method it is assigned to. */
function nameOf(node: ts.Node, file: ts.SourceFile): string {
  const named = node as ts.Node & { name?: ts.Node };
  if (named.name) return named.name.getText(file);
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) return parent.name.getText(file);
  if (ts.isPropertyDeclaration(parent)) return parent.name.getText(file);
  return "(anonymous)";
}

type Long = { lines: number; where: string; name: string };
const found: Long[] = [];
for (const path of sources(root)) {
  const file = ts.createSourceFile(path, readFileSync(path, "utf8"), ts.ScriptTarget.Latest, true);
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      const start = file.getLineAndCharacterOfPosition(node.getStart(file)).line;
      const end = file.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = end - start + 1;
      if (lines > limit) found.push({ lines, where: `${relative(".", path)}:${start + 1}`, name: nameOf(node, file) });
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
}
found.sort((a, b) => b.lines - a.lines);
for (const f of found) console.log(`${String(f.lines).padStart(4)}  ${f.name}  ${f.where}`);
console.log(`${found.length} function(s) over ${limit} lines in ${root}/`);
