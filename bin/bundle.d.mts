/** bin/bundle.mjs: the repository's TypeScript entries bundled for `npm start` and `memory-admin`. */
export function bundled(entry: string, name: string, onBuild?: () => void): Promise<string>;
export function runEntry(entry: string, name: string): Promise<void>;
