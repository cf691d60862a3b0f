/**
 * Which statement texts the embedded database keeps as named (prepared) statements: a text is
 * named the second time it is seen, so a one-off text (a migration, an ad-hoc query) costs
 * nothing, and at most `capacity` are kept, the least recently used closed first. Pure
 * bookkeeping; lib/db/pglite-statements.ts does the protocol.
 */
export type StatementStep =
  | { kind: "plain" }
  | { kind: "execute"; name: string; paramTypes: number[] }
  | { kind: "prepare"; name: string; close?: string };

export class StatementCache {
  readonly #named = new Map<string, { name: string; paramTypes: number[] }>();
  readonly #seen = new Set<string>();
  #next = 0;

  constructor(readonly capacity: number) {}

  /** What to do for `text`; after a `prepare`, call `prepared` once the statement exists. */
  step(text: string): StatementStep {
    const named = this.#named.get(text);
    if (named) {
      // Map order is insertion order: re-inserting marks it most recently used.
      this.#named.delete(text);
      this.#named.set(text, named);
      return { kind: "execute", ...named };
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
    this.#named.set(text, { name, paramTypes });
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
