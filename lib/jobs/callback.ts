import { Receiver } from "@upstash/qstash";
import type { Deps } from "../deps";
import { unauthorized } from "../errors";
import { runJobByKey } from "./runner";
import { msUntilDue } from "./store";

/** Seconds of clock difference between QStash and us tolerated on the token's `nbf` and `exp`. */
export const SIGNATURE_CLOCK_TOLERANCE_S = 30;

/**
 * How early by our clock a delivery may come for its job and still be waited for. QStash delivers
 * at the run's not-before second by its own clock, rounded up from the job's `run_at`; when its
 * clock runs ahead of ours by more than what the rounding added, the delivery comes before the job
 * is due here. Answered `ran: false`, the job would then wait for the next sweep (a minute).
 */
export const EARLY_DELIVERY_WAIT_MS = 5_000;

/**
 * How long to wait for a job that a delivery did not run, from how long until it is due (null: no
 * such job, or a worker holds it): null unless it is due within EARLY_DELIVERY_WAIT_MS.
 */
export function earlyDeliveryWait(msUntilDue: number | null): number | null {
  return msUntilDue !== null && msUntilDue > 0 && msUntilDue <= EARLY_DELIVERY_WAIT_MS ? msUntilDue : null;
}

/**
 * A QStash doorbell delivery: the signature over the raw body and URL is verified with the
 * current and then the next signing key before anything is parsed; then the job is claimed and
 * run through the job table, and the answer (2xx) comes only after its writes are committed.
 * A delivery for a job that is not due, already done or held by another worker (a duplicate) is
 * answered `ran: false`: the job table, not the message, says what is left to do. One that came
 * up to EARLY_DELIVERY_WAIT_MS before its job is due waits for it, then runs it.
 */
export async function handleJobCallback(
  deps: Deps,
  request: { signature: string | undefined; rawBody: string; url: string },
): Promise<{ ran: boolean; key?: string; reason?: string }> {
  const { currentSigningKey, nextSigningKey } = deps.config.qstash;
  if (!currentSigningKey || !nextSigningKey) throw unauthorized("Job callbacks are not configured");
  if (!request.signature) throw unauthorized("Missing QStash signature");
  // devMode false: a QSTASH_DEV variable must never swap our keys for the public dev-server keys.
  const receiver = new Receiver({ currentSigningKey, nextSigningKey, devMode: false });
  const valid = await receiver
    .verify({
      signature: request.signature,
      body: request.rawBody,
      url: request.url,
      clockTolerance: SIGNATURE_CLOCK_TOLERANCE_S,
    })
    .catch(() => false);
  if (!valid) throw unauthorized("Invalid QStash signature");
  let key: unknown;
  try {
    key = (JSON.parse(request.rawBody) as { key?: unknown } | null)?.key;
  } catch {
    key = undefined;
  }
  if (typeof key !== "string" || key.length === 0) return { ran: false, reason: "no job key" };
  if (await runJobByKey(deps, key)) return { ran: true, key };
  // Not run: a duplicate, a job another worker holds, a stale delivery (the job was rescheduled
  // later and rung again), or one that came a little early. Only the last is waited for.
  const wait = earlyDeliveryWait(await msUntilDue(deps.db, key, deps.clock.now()));
  if (wait === null) return { ran: false, key };
  await new Promise((resolve) => setTimeout(resolve, wait));
  return { ran: await runJobByKey(deps, key), key };
}
