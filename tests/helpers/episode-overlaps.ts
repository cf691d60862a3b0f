/** An episode of a thread as the crash suites read it back: its range and how it was cut. */
export interface CutEpisode {
  id: string;
  threadId: string;
  status: string;
  fromSeq: number;
  toSeq: number;
  trigger: string | null;
  /** When it was cut (the order of cuts). */
  createdAt: number;
}

/**
 * The pairs of live (not archived) episodes of a thread that share a message and that no repeated
 * end explains. A repeated end without new messages takes the whole thread again (the spec: another
 * episode): an `end` episode from message 1 to the thread's last number, at least the end of what
 * earlier cuts covered (past it when the thread ends with a compaction summary, which no episode
 * covers), on a thread to which the client sent two ends with no message between them, at most
 * once per such pair.
 */
export function unexplainedOverlaps(
  episodes: CutEpisode[],
  repeatedEnds: Map<string, number>,
): { threadId: string; earlier: CutEpisode; later: CutEpisode }[] {
  const found: { threadId: string; earlier: CutEpisode; later: CutEpisode }[] = [];
  const byThread = new Map<string, CutEpisode[]>();
  for (const e of episodes) {
    if (e.status === "archived" || e.status === "deleted") continue;
    byThread.set(e.threadId, [...(byThread.get(e.threadId) ?? []), e]);
  }
  for (const [threadId, list] of byThread) {
    list.sort((a, b) => a.createdAt - b.createdAt || a.toSeq - b.toSeq);
    let explainable = repeatedEnds.get(threadId) ?? 0;
    const kept: CutEpisode[] = [];
    for (const later of list) {
      const covered = Math.max(0, ...kept.map((e) => e.toSeq));
      const overlapping = kept.filter((earlier) => earlier.toSeq >= later.fromSeq && later.toSeq >= earlier.fromSeq);
      const recut = later.trigger === "end" && later.fromSeq === 1 && later.toSeq >= covered;
      if (overlapping.length > 0 && recut && explainable > 0) explainable--;
      else for (const earlier of overlapping) found.push({ threadId, earlier, later });
      kept.push(later);
    }
  }
  return found;
}
