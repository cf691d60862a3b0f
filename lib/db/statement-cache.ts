/**
 * Which statement texts the embedded database keeps as named (prepared) statements: a text is
 * named the second time it is seen, so a one-off text (a migration, an ad-hoc query) costs
 * nothing, and at most `capacity` are kept, the least recently used closed first. A statement
 * that has served `renewAfter(text)` runs is prepared again under a new name (its plan made
 * anew). Pure bookkeeping; lib/db/pglite-statements.ts does the protocol.
 */
export type StatementStep =
  | { kind: "plain" }
  | { kind: "execute"; name: string; paramTypes: number[] }
  | { kind: "prepare"; name: string; close?: string };

/** How many runs a text's named statement serves before it is prepared (and so planned) anew. */
export type RenewAfter = (text: string) => number;

export class StatementCache {
  readonly #named = new Map<string, { name: string; paramTypes: number[]; runs: number }>();
  readonly #seen = new Set<string>();
  #next = 0;

  constructor(
    readonly capacity: number,
    readonly renewAfter: RenewAfter = () => Number.POSITIVE_INFINITY,
  ) {}

  /** What to do for `text`; after a `prepare`, call `prepared` once the statement exists. */
  step(text: string): StatementStep {
    const named = this.#named.get(text);
    if (named && named.runs >= this.renewAfter(text)) {
      this.#named.delete(text);
      return { kind: "prepare", name: `stmt_${this.#next++}`, close: named.name };
    }
    if (named) {
      // Map order is insertion order: re-inserting marks it most recently used.
      this.#named.delete(text);
      this.#named.set(text, { ...named, runs: named.runs + 1 });
      return { kind: "execute", name: named.name, paramTypes: named.paramTypes };
    }
    if (!this.#seen.has(text)) {
      this.#seen.add(text);
      if (this.#seen.size > this.capacity * 4) this.#seen.delete(this.#seen.values().next().value as string);
      return { kind: "plain" };
    }
    const name = `stmt_${this.#next++}`;
    if (this.#named.size < this.capacity) return { kind: "prepare", name };
    const [oldest, entry] = this.#named.entries().next().value as [string, { name: string }];
    this.#named.delete(oldest);
    return { kind: "prepare", name, close: entry.name };
  }

  prepared(text: string, name: string, paramTypes: number[]): void {
    this.#seen.delete(text);
    this.#named.set(text, { name, paramTypes, runs: 1 });
  }

  /** The statement no longer runs as prepared (its result type changed): plain until seen again. */
  forget(text: string): string | undefined {
    const named = this.#named.get(text);
    this.#named.delete(text);
    return named?.name;
  }

  get size(): number {
    return this.#named.size;
  }
}
