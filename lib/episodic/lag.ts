import { telemetry } from "../telemetry";

/**
 * Reports an episode's lag, from its end (`ended_at`, when the thread went idle or was ended) to
 * its summary's completion, to whoever listens (the metrics of the Node.js host). The statement
 * that writes the summary reads it (lib/episodic/summary.ts), so it costs no statement.
 */
export function reportEpisodeLag(lagSeconds: number | null): void {
  if (lagSeconds === null) return;
  telemetry().episodeCompleted?.(Math.max(0, lagSeconds));
}
