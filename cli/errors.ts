/** A failure the user can act on: one sentence on stderr, no stack; exit code 1 (2: a usage error). */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: 1 | 2 = 1,
  ) {
    super(message);
  }
}
