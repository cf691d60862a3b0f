import type { ComponentChildren } from "preact";
import { useRef, useState } from "preact/hooks";
import { api, type Schemas, unwrap } from "../api/client";
import { formatDate, formatDateTime } from "../lib/format";
import { formatPredicate } from "../lib/predicate";
import { href } from "../lib/router";
import { ConfirmDialog, useConfirm } from "./confirm";
import { Empty, ErrorMessage } from "./status";

export type BrowseFact = Schemas["BrowseFact"];

/** "subject predicate object" with the predicate as words, as the fact reads and as its Delete button names it. */
export const factLabel = (f: Pick<BrowseFact, "subject" | "predicate" | "object">) =>
  `${f.subject} ${formatPredicate(f.predicate)} ${f.object}`;

const time = (iso: string) => new Date(iso).getTime();

/** Where a fact stops holding: the earlier of its validity end and its invalidation, else null (open). */
function endOf(f: BrowseFact): string | null {
  const ends = [f.validUntil, f.invalidAt].filter((v): v is string => v !== null);
  if (ends.length === 0) return null;
  return ends.reduce((a, b) => (time(a) <= time(b) ? a : b));
}

interface Axis {
  start: number;
  end: number;
  now: number;
}

/** One time axis shared by a page of facts: the earliest validAt to now (or a later end). */
function axisOf(facts: BrowseFact[], now: number): Axis {
  let start = now;
  let end = now;
  for (const f of facts) {
    start = Math.min(start, time(f.validAt));
    const e = endOf(f);
    if (e) end = Math.max(end, time(e));
  }
  // At least a month, so a page of today's facts still has an axis with distinct dates.
  const month = 30 * 86_400_000;
  if (end - start < month) start = end - month;
  return { start, end, now };
}

const pct = (axis: Axis, t: number) => ((t - axis.start) / (axis.end - axis.start)) * 100;

/**
 * Facts with their validity drawn on one shared time axis (validAt to the end of validity, its
 * invalidation or now), confidence, the source quote (on hover and keyboard focus, and on a press),
 * linked entities and a Delete with confirmation; `empty` when there are none. Used by the facts
 * page and an entity's page.
 */
export function FactList({
  facts,
  projectId,
  dataset,
  onDeleted,
  label,
  empty,
}: {
  facts: BrowseFact[];
  projectId: string;
  dataset: string;
  onDeleted: () => void;
  /** The list's accessible name. */
  label: string;
  /** What is said when there are no facts (none yet, or the last one deleted). */
  empty: ComponentChildren;
}) {
  const [deleted, setDeleted] = useState<string | null>(null);
  const remove = useConfirm(async (fact: BrowseFact) => {
    setDeleted(null);
    try {
      await unwrap(
        api.DELETE("/dashboard/browse/facts/{id}", { params: { path: { id: fact.factId }, query: { projectId } } }),
      );
      setDeleted(factLabel(fact));
    } finally {
      // Refused too (404: deleted in another tab): the list shows what is left either way.
      onDeleted();
    }
  });
  // The pressed button goes with its fact, and the list itself with the last one: the keyboard
  // continues from this region, which stays (holding the empty message when nothing is left).
  const region = useRef<HTMLDivElement>(null);
  return (
    <div class="fact-list" tabIndex={-1} ref={region}>
      <ErrorMessage error={remove.error} />
      <p class="visually-hidden" aria-live="polite">
        {deleted && !remove.error ? `Fact deleted: ${deleted}` : ""}
      </p>
      {facts.length === 0 ? (
        <Empty>{empty}</Empty>
      ) : (
        <FactRows
          facts={facts}
          label={label}
          onDelete={remove.ask}
          entityHref={(id) => href("projects", projectId, "data", dataset, "entities", id)}
        />
      )}
      <ConfirmDialog
        {...remove.dialog}
        title="Delete this fact?"
        message={`“${remove.target ? factLabel(remove.target) : ""}” is removed permanently, with its entity links: recall stops returning it and point-in-time recall will not know it either. This cannot be undone.`}
        confirmLabel="Delete fact"
        focusAfterConfirm={region}
      />
    </div>
  );
}

/** The shared time axis and a row per fact. */
function FactRows({
  facts,
  label,
  onDelete,
  entityHref,
}: {
  facts: BrowseFact[];
  label: string;
  onDelete: (fact: BrowseFact) => void;
  entityHref: (entityId: string) => string;
}) {
  const now = Date.now();
  const axis = axisOf(facts, now);
  const mid = axis.start + (axis.end - axis.start) / 2;
  return (
    <>
      <div class="fact-row fact-axis-row" aria-hidden="true">
        <span class="fact-axis-label">Fact</span>
        <div class="fact-axis">
          <span style={{ left: "0%" }}>{formatDate(new Date(axis.start).toISOString())}</span>
          <span style={{ left: "50%" }}>{formatDate(new Date(mid).toISOString())}</span>
          <span style={{ left: "100%" }}>{axis.end > now ? formatDate(new Date(axis.end).toISOString()) : "now"}</span>
        </div>
        <span />
      </div>
      <ol class="facts" aria-label={label}>
        {facts.map((f) => (
          <FactItem key={f.factId} fact={f} axis={axis} entityHref={entityHref} onDelete={() => onDelete(f)} />
        ))}
      </ol>
    </>
  );
}

function FactItem({
  fact: f,
  axis,
  entityHref,
  onDelete,
}: {
  fact: BrowseFact;
  axis: Axis;
  entityHref: (entityId: string) => string;
  onDelete: () => void;
}) {
  const invalidated = f.invalidAt !== null;
  const end = endOf(f);
  const from = pct(axis, time(f.validAt));
  const to = pct(axis, end ? time(end) : axis.now);
  const label = factLabel(f);
  // Escape hides the hover/focus tip without moving focus (it comes back on the next hover or focus).
  const [tipOff, setTipOff] = useState(false);
  return (
    <li class={`fact-row fact${invalidated ? " is-invalidated" : ""}`}>
      <div class="fact-main">
        <p class="fact-text">
          <span class="fact-subject">{f.subject}</span>{" "}
          <span class="fact-predicate" title={f.predicate}>
            {formatPredicate(f.predicate)}
          </span>{" "}
          <span class="fact-object">{f.object}</span>
        </p>
        <div class="fact-meta">
          <span title="The extraction model's self-rating (0-1): a coarse filter, not a probability.">
            confidence {f.confidence.toFixed(2)}
          </span>
          {invalidated && (
            <span class="badge danger" title={`Invalidated ${formatDateTime(f.invalidAt)}`}>
              invalidated
            </span>
          )}
          {f.entities.length > 0 && (
            <span class="fact-entities">
              <span class="visually-hidden">Entities: </span>
              {f.entities.map((e) => (
                <a key={e.entityId} href={entityHref(e.entityId)} class="entity-chip">
                  {e.name} <span class="entity-type">{e.type}</span>
                </a>
              ))}
            </span>
          )}
        </div>
        <div class={`quote${tipOff ? " tip-off" : ""}`}>
          <details>
            {/* biome-ignore lint/a11y/noStaticElementInteractions: a summary is the details' own button */}
            <summary
              title={f.sourceQuote}
              onKeyDown={(e) => e.key === "Escape" && setTipOff(true)}
              onBlur={() => setTipOff(false)}
              onMouseLeave={() => setTipOff(false)}
            >
              Source quote
            </summary>
            <blockquote>“{f.sourceQuote}”</blockquote>
          </details>
          <span class="quote-tip" aria-hidden="true">
            “{f.sourceQuote}”
          </span>
        </div>
      </div>
      <div class="fact-time">
        <div class="timeline" aria-hidden="true">
          <span class="timeline-now" style={{ left: `${pct(axis, axis.now)}%` }} />
          <span
            class={`timeline-bar${end ? "" : " is-open"}`}
            style={{ left: `${from}%`, width: `${Math.max(to - from, 0)}%` }}
          />
        </div>
        <p class="validity">
          <span class="visually-hidden">Valid </span>
          <time dateTime={f.validAt}>{formatDate(f.validAt)}</time> →{" "}
          {f.validUntil ? (
            <time dateTime={f.validUntil}>{formatDate(f.validUntil)}</time>
          ) : f.invalidAt ? (
            <time dateTime={f.invalidAt}>{formatDate(f.invalidAt)}</time>
          ) : (
            "now"
          )}
          {f.validUntil && f.invalidAt && (
            <span class="hint">
              {" "}
              (invalidated <time dateTime={f.invalidAt}>{formatDate(f.invalidAt)}</time>)
            </span>
          )}
        </p>
      </div>
      <div class="fact-actions">
        <button type="button" class="danger" onClick={onDelete} aria-label={`Delete fact ${label}`}>
          Delete
        </button>
      </div>
    </li>
  );
}
