/**
 * The cron trigger of wrangler.toml's [triggers]: the sweep, every minute. Change both together
 * (tests/edge/jobs.test.ts checks that every configured cron is one the handler accepts).
 */
export const SWEEP_CRON = "* * * * *";

/**
 * Whether the Worker's scheduled handler runs the sweep for a cron string: for the configured
 * trigger, and for an empty or absent one, which is what a local poke sends when it names no
 * cron (`curl …/cdn-cgi/local/scheduled`, or `/__scheduled` under `wrangler dev --test-scheduled`):
 * the Worker has one trigger, so "the scheduled event" can only mean that one. Any other non-empty
 * string is an error, never a silent no-op: a trigger added to wrangler.toml without a handler.
 */
export function runsSweep(cron: string | undefined | null): boolean {
  return cron === undefined || cron === null || cron.trim() === "" || cron === SWEEP_CRON;
}
