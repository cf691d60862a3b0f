/**
 * Why a synthesis that was asked for is missing, read from what the server did (lib/recall/recall.ts):
 * an empty block is never sent to the model; while the project's monthly token budget is spent
 * the call is skipped, so the answer's timing has no `synthesis` entry; otherwise the call was
 * made (and timed) and failed.
 */
export function missingSynthesis(contextEmpty: boolean, timing: { name: string }[]): string {
  if (contextEmpty) return "None: the context block is empty.";
  if (!timing.some((t) => t.name === "synthesis")) return "Skipped: the project's monthly token budget is spent.";
  return "None: the model call failed (recall still answered).";
}
