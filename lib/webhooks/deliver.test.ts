import { Webhook, WebhookVerificationError } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { attemptOutcome, DISABLE_AFTER_MS, SECRET_OVERLAP_MS, signedHeaders, signingSecrets } from "./deliver";

const done = new Date("2026-01-02T00:00:00Z");
const retryUntil = new Date("2026-01-03T00:00:00Z");

describe("attemptOutcome", () => {
  it("a success: no next attempt", () => {
    const out = attemptOutcome({ statusCode: 204, error: null, durationMs: 5 }, 3, done, retryUntil);
    expect(out.ok).toBe(true);
    expect(out.next).toBeNull();
    expect(out.at).toBe(done.toISOString());
    expect(out.disableBefore).toBe(new Date(done.getTime() - DISABLE_AFTER_MS).toISOString());
  });

  it("a failure: the backoff of the attempt it was, and the reason that would disable the endpoint", () => {
    const first = attemptOutcome({ statusCode: 500, error: "HTTP 500", durationMs: 5 }, 0, done, retryUntil);
    expect(first.ok).toBe(false);
    expect(first.next?.getTime()).toBe(done.getTime() + 30_000);
    const third = attemptOutcome({ statusCode: 500, error: "HTTP 500", durationMs: 5 }, 2, done, retryUntil);
    expect(third.next?.getTime()).toBe(done.getTime() + 120_000);
    expect(third.reason).toBe("Every attempt failed for a day; the last: HTTP 500");
  });

  it("a failure once the retry window is over: no next attempt; a long error is cut to 500 characters", () => {
    const out = attemptOutcome({ statusCode: null, error: "x".repeat(900), durationMs: 5 }, 9, retryUntil, retryUntil);
    expect(out.next).toBeNull();
    expect(out.reason).toHaveLength(500);
  });
});

const secretA = `whsec_${Buffer.from("a".repeat(24)).toString("base64")}`;
const secretB = `whsec_${Buffer.from("b".repeat(24)).toString("base64")}`;
const rotatedAt = new Date("2026-01-02T00:00:00Z");
const rotated = {
  secret: secretB,
  previousSecret: secretA,
  previousSecretExpiresAt: new Date(rotatedAt.getTime() + SECRET_OVERLAP_MS),
};

describe("signingSecrets", () => {
  it("an endpoint never rotated: its secret alone", () => {
    expect(signingSecrets({ secret: secretA, previousSecret: null, previousSecretExpiresAt: null }, rotatedAt)).toEqual(
      [secretA],
    );
  });

  it("for a day after a rotation the new secret and the replaced one; from the day's end the new one alone", () => {
    expect(signingSecrets(rotated, rotatedAt)).toEqual([secretB, secretA]);
    const end = rotated.previousSecretExpiresAt.getTime();
    expect(signingSecrets(rotated, new Date(end - 1))).toEqual([secretB, secretA]);
    expect(signingSecrets(rotated, new Date(end))).toEqual([secretB]);
    expect(signingSecrets(rotated, new Date(end + DISABLE_AFTER_MS))).toEqual([secretB]);
  });
});

describe("signedHeaders", () => {
  it("one signature per secret, space-separated: a receiver with either secret verifies, another does not", () => {
    // The library checks the timestamp against the real time.
    const at = new Date();
    const body = JSON.stringify({ type: "dataset.erased", timestamp: at.toISOString(), data: { dataset: "ds" } });
    const headers = signedHeaders([secretB, secretA], "whd_1", at, body);
    expect(headers["webhook-signature"]).toMatch(/^v1,\S+ v1,\S+$/);
    for (const secret of [secretA, secretB])
      expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    const other = `whsec_${Buffer.from("c".repeat(24)).toString("base64")}`;
    expect(() => new Webhook(other).verify(body, headers)).toThrow(WebhookVerificationError);
    // One secret: one signature, the form every attempt had before rotations.
    const single = signedHeaders([secretB], "whd_1", at, body);
    expect(single["webhook-signature"]).toBe(new Webhook(secretB).sign("whd_1", at, body));
    expect(() => new Webhook(secretA).verify(body, single)).toThrow(WebhookVerificationError);
  });
});
