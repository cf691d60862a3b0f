/** bin/bundle.mjs: the repository's TypeScript entries bundled for `npm start`. */
export function bundled(entry: string, name: string): Promise<string>;
export function unwritable(err: unknown): boolean;
