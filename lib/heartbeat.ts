/**
 * Renews a lease while the work that holds it runs: `renew` every `everyMs`, one at a time, until
 * `stop()` or until `renew` answers false (the lease is no longer ours). A failed renewal is
 * reported and the next one tried. `stop()` waits for a renewal in flight, so what is written
 * after it sees the lease as it really is.
 */
export function heartbeat(everyMs: number, renew: () => Promise<boolean>, onError: (err: unknown) => void) {
  let beat: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    beat = beat
      .then(async () => {
        if (!(await renew())) clearInterval(timer);
      })
      .catch(onError);
  }, everyMs);
  (timer as { unref?: () => void }).unref?.();
  return {
    async stop() {
      clearInterval(timer);
      await beat;
    },
  };
}
