import type { ComponentChildren } from "preact";
import type { paths } from "../api/schema";
import { formatNumber } from "../lib/format";

/** One UTC day of GET /dashboard/projects/{id}/activity. */
type Day =
  paths["/dashboard/projects/{id}/activity"]["get"]["responses"][200]["content"]["application/json"]["days"][number];

const dayShort = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", timeZone: "UTC" });
const dayLong = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeZone: "UTC" });
/** `YYYY-MM-DD` (a UTC day) as a date at UTC midnight, formatted in UTC so it never shifts a day. */
const asDate = (day: string) => new Date(`${day}T00:00:00Z`);
/** "1 episode", "3 facts". */
const count = (n: number, noun: string) => `${formatNumber(n)} ${noun}${n === 1 ? "" : "s"}`;

/** The smallest of 1, 2, 5 × 10^n at least `n`: the chart's top gridline. */
function niceCeiling(n: number): number {
  if (n <= 1) return 1;
  const power = 10 ** Math.floor(Math.log10(n));
  for (const step of [1, 2, 5, 10]) if (step * power >= n) return step * power;
  return 10 * power;
}

const SLOT = 10;
const HEIGHT = 100;

/**
 * Episodes and facts per day as paired bars: an inline SVG stretched to the width it gets (so it
 * fits 375 px and a desktop alike), with its labels in HTML so text never scales with it. Screen
 * readers get a summary as the image's name and every number in a table.
 */
export function ActivityChart({ days: loaded, caption }: { days: Day[] | undefined; caption: string }) {
  // Before the first answer: the same figure, empty, so nothing below it moves when it arrives.
  if (!loaded) return <ChartFrame caption={caption} />;
  const days = loaded;
  const top = niceCeiling(Math.max(0, ...days.map((d) => Math.max(d.episodes, d.facts))));
  const episodes = days.reduce((sum, d) => sum + d.episodes, 0);
  const facts = days.reduce((sum, d) => sum + d.facts, 0);
  const busiest = days.reduce<Day | undefined>(
    (best, d) => (d.episodes + d.facts > (best ? best.episodes + best.facts : 0) ? d : best),
    undefined,
  );
  const summary =
    `Bar chart of the last ${days.length} days: ${count(episodes, "episode")} and ${count(facts, "fact")} in total.` +
    (busiest
      ? ` Busiest day ${dayLong.format(asDate(busiest.day))}: ${count(busiest.episodes, "episode")}, ${count(busiest.facts, "fact")}.`
      : "");
  const y = (n: number) => HEIGHT - (n / top) * HEIGHT;
  // The first, middle and last days label the x axis.
  const ticks = [...new Set([0, Math.floor((days.length - 1) / 2), days.length - 1])]
    .filter((i) => i >= 0)
    .map((i) => dayShort.format(asDate(days[i]!.day)));

  return (
    <ChartFrame
      caption={caption}
      totals={{ episodes, facts }}
      top={top}
      x={ticks}
      plot={days.map((d, i) => (
        <g key={d.day}>
          <title>
            {`${dayLong.format(asDate(d.day))}: ${count(d.episodes, "episode")}, ${count(d.facts, "fact")}`}
          </title>
          {/* A transparent slot, so the whole day shows its tooltip on hover. */}
          <rect class="overview-slot" x={i * SLOT} y={0} width={SLOT} height={HEIGHT} />
          <rect
            class="overview-episodes"
            x={i * SLOT + 1}
            y={y(d.episodes)}
            width={4}
            height={HEIGHT - y(d.episodes)}
          />
          <rect class="overview-facts" x={i * SLOT + 5} y={y(d.facts)} width={4} height={HEIGHT - y(d.facts)} />
        </g>
      ))}
      slots={days.length}
      summary={summary}
    >
      <details class="overview-table">
        <summary>Show as table</summary>
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">{caption}</caption>
            <thead>
              <tr>
                <th scope="col">Day (UTC)</th>
                <th scope="col" class="num">
                  Episodes
                </th>
                <th scope="col" class="num">
                  Facts
                </th>
              </tr>
            </thead>
            <tbody>
              {days.map((d) => (
                <tr key={d.day}>
                  <th scope="row">
                    <time dateTime={d.day}>{dayLong.format(asDate(d.day))}</time>
                  </th>
                  <td class="num">{formatNumber(d.episodes)}</td>
                  <td class="num">{formatNumber(d.facts)}</td>
                </tr>
              ))}
            </tbody>
            <tfoot>
              <tr>
                <th scope="row">Total</th>
                <td class="num">{formatNumber(episodes)}</td>
                <td class="num">{formatNumber(facts)}</td>
              </tr>
            </tfoot>
          </table>
        </div>
      </details>
    </ChartFrame>
  );
}

/** The chart's frame: caption, legend, axes and the plot; without `summary` an empty placeholder. */
function ChartFrame({
  caption,
  totals,
  top = 1,
  x = [],
  plot,
  slots = 30,
  summary,
  children,
}: {
  caption: string;
  totals?: { episodes: number; facts: number };
  top?: number;
  x?: string[];
  plot?: ComponentChildren;
  slots?: number;
  summary?: string;
  children?: ComponentChildren;
}) {
  const loading = summary === undefined;
  return (
    <figure class="overview-chart" aria-busy={loading}>
      <figcaption>{caption}</figcaption>
      <ul class="overview-legend" aria-hidden="true">
        <li>
          <span class="overview-swatch overview-episodes" /> Episodes ({totals ? formatNumber(totals.episodes) : "…"})
        </li>
        <li>
          <span class="overview-swatch overview-facts" /> Facts ({totals ? formatNumber(totals.facts) : "…"})
        </li>
      </ul>
      {totals && totals.episodes + totals.facts === 0 && (
        <p class="overview-none">No episodes or facts in the last {slots} days.</p>
      )}
      <div class="overview-plot">
        <div class="overview-y" aria-hidden="true">
          <span>{loading ? "" : formatNumber(top)}</span>
          <span>{!loading && Number.isInteger(top / 2) ? formatNumber(top / 2) : ""}</span>
          <span>0</span>
        </div>
        <svg
          class="overview-svg"
          viewBox={`0 0 ${Math.max(1, slots) * SLOT} ${HEIGHT}`}
          preserveAspectRatio="none"
          width="100%"
          role={loading ? undefined : "img"}
          aria-label={summary}
          aria-hidden={loading ? true : undefined}
        >
          {[0, 0.5, 1].map((f) => (
            <line
              key={f}
              class={f === 0 ? "overview-axis" : "overview-grid"}
              x1={0}
              x2={slots * SLOT}
              y1={HEIGHT - f * HEIGHT}
              y2={HEIGHT - f * HEIGHT}
              vector-effect="non-scaling-stroke"
            />
          ))}
          {plot}
        </svg>
      </div>
      <div class="overview-x" aria-hidden="true">
        {x.length > 0 ? x.map((label) => <span key={label}>{label}</span>) : <span>&nbsp;</span>}
      </div>
      {children ?? (
        <div class="overview-table-slot" aria-hidden="true">
          &nbsp;
        </div>
      )}
    </figure>
  );
}
