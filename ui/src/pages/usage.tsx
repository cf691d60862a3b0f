import { api, type Schemas, unwrap } from "../api/client";
import { Empty, ErrorMessage, Progress } from "../components/status";
import { formatDateTime, formatNumber } from "../lib/format";
import { useLoad } from "../lib/use-load";
import "./usage.css";

type Group = Schemas["UsageGroup"];
type Budget = Schemas["UsageBudget"];

/** The last 30 UTC days, today included: the page's range. */
const DAYS = 30;

const dayShort = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", timeZone: "UTC" });
const dayLong = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeZone: "UTC" });
const asDate = (day: string) => new Date(`${day}T00:00:00Z`);

/** Every day of the range (UTC), oldest first, with the ledger's group for it or nothing spent. */
export function fillDays(groups: Group[], from: Date, days: number): Group[] {
  const byDay = new Map(groups.map((g) => [g.key, g]));
  return Array.from({ length: days }, (_, i) => {
    const key = new Date(from.getTime() + i * 86_400_000).toISOString().slice(0, 10);
    return (
      byDay.get(key) ?? {
        key,
        calls: 0,
        inputTokens: 0,
        outputTokens: 0,
        totalTokens: 0,
        unknownCalls: 0,
        failedCalls: 0,
      }
    );
  });
}

/**
 * A project's usage: where it stands against its monthly token budget, tokens per day over the
 * last 30 days, the datasets and operations that spent them. Read from the usage ledger
 * (GET /dashboard/projects/{id}/usage, the same rows as GET /v1/usage).
 */
export function UsagePage({ projectId }: { projectId: string }) {
  const today = new Date();
  const from = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - (DAYS - 1)));
  const usage = useLoad(
    () =>
      unwrap(
        api.GET("/dashboard/projects/{id}/usage", {
          params: { path: { id: projectId }, query: { start: from.toISOString() } },
        }),
      ),
    [projectId],
  );
  const data = usage.data;
  return (
    <section aria-labelledby="usage-title" class="usage-page">
      <h2 id="usage-title">Usage</h2>
      <p class="hint">
        Tokens the model provider reported for this project's calls: episodes, fact extraction, recall, chat, compaction
        and embeddings. Calls whose provider reported no usage are counted as unknown, not as zero.
      </p>
      <Progress active={usage.loading} label="Loading usage" />
      <ErrorMessage error={usage.error} />
      {data && (
        <>
          <BudgetCard budget={data.budget} />
          <section aria-labelledby="usage-days-title" class="card">
            <h3 id="usage-days-title">Tokens per day (last {DAYS} days, UTC)</h3>
            <p>
              {formatNumber(data.total.totalTokens)} tokens in {formatNumber(data.total.calls)} calls
              {data.total.unknownCalls > 0 && <> ({formatNumber(data.total.unknownCalls)} with unknown usage)</>}
              {data.total.failedCalls > 0 && <>, {formatNumber(data.total.failedCalls)} failed</>}.
            </p>
            <DayChart days={fillDays(data.days, from, DAYS)} />
          </section>
          <GroupTable id="usage-datasets" title="Top datasets" groups={data.datasets} name="Dataset" />
          <GroupTable id="usage-operations" title="By operation" groups={data.operations} name="Operation" />
          <GroupTable id="usage-models" title="By model" groups={data.models} name="Model" />
        </>
      )}
    </section>
  );
}

function BudgetCard({ budget }: { budget: Budget }) {
  const limit = budget.monthlyTokenBudget;
  const share = limit ? Math.min(budget.spent / limit, 1) : 0;
  return (
    <section aria-labelledby="usage-budget-title" class="card usage-budget">
      <h3 id="usage-budget-title">This month ({budget.month})</h3>
      {limit === null ? (
        <p>
          {formatNumber(budget.spent)} tokens. No monthly token budget is set (Settings, <code>usage</code>).
        </p>
      ) : (
        <>
          <p>
            {formatNumber(budget.spent)} of {formatNumber(limit)} tokens{" "}
            {budget.exhausted ? (
              <span class="badge danger">Budget spent</span>
            ) : (
              <span class="badge ok">{formatNumber(budget.remaining ?? 0)} left</span>
            )}
          </p>
          <meter min={0} max={1} value={share} high={0.9} aria-label="Share of the monthly budget spent" />
          {budget.exhausted && (
            <p class="hint">
              Until {formatDateTime(budget.resetsAt)} or a higher budget: new episodes wait in pending (they resume by
              themselves), recall answers without synthesis, chat answers 429. Messages are stored and recall works.
            </p>
          )}
        </>
      )}
    </section>
  );
}

/** Tokens per day as bars (inline SVG scaled to its width); every number is in the table below it. */
function DayChart({ days }: { days: Group[] }) {
  const top = Math.max(1, ...days.map((d) => d.totalTokens));
  const busiest = days.reduce((best, d) => (d.totalTokens > best.totalTokens ? d : best), days[0]);
  const summary = `Bar chart of tokens per day. Busiest day ${
    busiest ? `${dayLong.format(asDate(busiest.key ?? ""))}: ${formatNumber(busiest.totalTokens)} tokens` : "none"
  }.`;
  return (
    <figure class="usage-chart">
      <svg viewBox={`0 0 ${days.length * 10} 100`} preserveAspectRatio="none" role="img" aria-label={summary}>
        {days.map((d, i) => {
          const h = (d.totalTokens / top) * 100;
          return (
            <rect key={d.key} class="usage-bar" x={i * 10 + 1} y={100 - h} width={8} height={h}>
              <title>{`${dayLong.format(asDate(d.key ?? ""))}: ${formatNumber(d.totalTokens)} tokens`}</title>
            </rect>
          );
        })}
      </svg>
      <figcaption class="usage-axis">
        <span>{days[0] ? dayShort.format(asDate(days[0].key ?? "")) : ""}</span>
        <span>{days.at(-1) ? dayShort.format(asDate(days.at(-1)?.key ?? "")) : ""}</span>
      </figcaption>
      <details>
        <summary>Every day</summary>
        <GroupRows groups={days.filter((d) => d.calls > 0)} name="Day (UTC)" />
      </details>
    </figure>
  );
}

function GroupTable({ id, title, groups, name }: { id: string; title: string; groups: Group[]; name: string }) {
  return (
    <section aria-labelledby={id} class="card">
      <h3 id={id}>{title}</h3>
      {groups.length === 0 ? <Empty>No calls in the range.</Empty> : <GroupRows groups={groups} name={name} />}
    </section>
  );
}

function GroupRows({ groups, name }: { groups: Group[]; name: string }) {
  return (
    <div class="table-wrap">
      <table>
        <thead>
          <tr>
            <th scope="col">{name}</th>
            <th scope="col">Calls</th>
            <th scope="col">Input tokens</th>
            <th scope="col">Output tokens</th>
            <th scope="col">Total tokens</th>
            <th scope="col">Unknown usage</th>
            <th scope="col">Failed</th>
          </tr>
        </thead>
        <tbody>
          {groups.map((g) => (
            <tr key={g.key ?? ""}>
              <td class="mono">{g.key ?? "(no dataset)"}</td>
              <td>{formatNumber(g.calls)}</td>
              <td>{formatNumber(g.inputTokens)}</td>
              <td>{formatNumber(g.outputTokens)}</td>
              <td>{formatNumber(g.totalTokens)}</td>
              <td>{formatNumber(g.unknownCalls)}</td>
              <td>{formatNumber(g.failedCalls)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
