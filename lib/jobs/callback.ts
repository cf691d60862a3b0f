import { Receiver } from "@upstash/qstash";
import type { Deps } from "../deps";
import { unauthorized } from "../errors";
import { runJobByKey } from "./runner";

/** Seconds of clock difference between QStash and us tolerated on the token's `nbf` and `exp`. */
export const SIGNATURE_CLOCK_TOLERANCE_S = 30;

/**
 * A QStash doorbell delivery: the signature over the raw body and URL is verified with the
 * current and then the next signing key before anything is parsed; then the job is claimed and
 * run through the job table, and the answer (2xx) comes only after its writes are committed.
 * A delivery for a job that is not due, already done or held by another worker (a duplicate) is
 * answered `ran: false`: the job table, not the message, says what is left to do.
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
  const ran = await runJobByKey(deps, key);
  return { ran, key };
}
