/** "late" when `work` has not settled within `ms` (it goes on); the timer never holds the process open. */
export async function settledWithin(work: Promise<unknown>, ms: number): Promise<"settled" | "late"> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((resolve) => {
    timer = setTimeout(() => resolve("late"), ms);
    timer.unref?.();
  });
  try {
    return await Promise.race([
      work.then(
        () => "settled" as const,
        () => "settled" as const,
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
