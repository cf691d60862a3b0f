/**
 * `npm run dev`'s stand-in for Cloudflare's cron triggers, which `wrangler dev` never fires: the
 * crons of wrangler.toml's [triggers] are read, and on every minute (UTC) one matches, the Worker's
 * scheduled handler is run through wrangler's local trigger route, `/cdn-cgi/local/scheduled`,
 * with that cron string and the minute as its scheduled time, as Cloudflare would. Once more at
 * start, as soon as the Worker answers: nothing ran while dev was stopped (deployed, the cron
 * would have), so jobs left by an earlier session run at once instead of at the next minute.
 */

/** The `crons = [...]` of the [triggers] table of a wrangler.toml (empty when there is none). */
export function cronsOfWranglerToml(toml: string): string[] {
  let table = "";
  let collecting: string | undefined;
  for (const rawLine of toml.split(/\r?\n/)) {
    const line = rawLine.replace(/(^|\s)#.*$/, "").trim();
    if (collecting !== undefined) {
      collecting += ` ${line}`;
      if (line.includes("]")) break;
      continue;
    }
    const header = /^\[\s*([^\]]+?)\s*\]$/.exec(line);
    if (header) {
      table = header[1];
      continue;
    }
    const crons = table === "triggers" ? /^crons\s*=\s*(\[.*)$/.exec(line) : null;
    if (crons) {
      collecting = crons[1];
      if (collecting.includes("]")) break;
    }
  }
  if (collecting === undefined) return [];
  const list = collecting.slice(0, collecting.indexOf("]") + 1);
  return [...list.matchAll(/"([^"]*)"|'([^']*)'/g)].map((m) => m[1] ?? m[2]);
}

/** Which minutes and hours a cron runs at; the other fields are `*`. */
export interface CronSchedule {
  cron: string;
  minutes: Set<number>;
  hours: Set<number>;
}

function parseField(field: string, min: number, max: number): Set<number> | undefined {
  const values = new Set<number>();
  for (const part of field.split(",")) {
    const m = /^(\*|(\d+)(?:-(\d+))?)(?:\/(\d+))?$/.exec(part);
    if (!m) return undefined;
    const from = m[1] === "*" ? min : Number(m[2]);
    const to = m[1] === "*" ? max : m[3] !== undefined ? Number(m[3]) : m[4] !== undefined ? max : from;
    const step = m[4] !== undefined ? Number(m[4]) : 1;
    if (from < min || to > max || from > to || step < 1) return undefined;
    for (let v = from; v <= to; v += step) values.add(v);
  }
  return values;
}

/**
 * The subset the local ticker drives: minute and hour fields with `*`, numbers, ranges, lists and
 * steps (`*\/5`, `0,30`, `9-17`), and `*` for day of month, month and day of week. Anything else
 * (names, `L`, `W`, `#`, a restricted day) is `undefined`: not driven locally (the caller warns).
 */
export function parseCron(cron: string): CronSchedule | undefined {
  const fields = cron.trim().split(/\s+/);
  if (fields.length !== 5 || fields.slice(2).some((f) => f !== "*")) return undefined;
  const minutes = parseField(fields[0], 0, 59);
  const hours = parseField(fields[1], 0, 23);
  return minutes && hours ? { cron, minutes, hours } : undefined;
}

/** Whether the schedule runs in the minute that holds `at` (UTC, as Cloudflare's crons). */
export function cronMatches(schedule: CronSchedule, at: Date): boolean {
  return schedule.minutes.has(at.getUTCMinutes()) && schedule.hours.has(at.getUTCHours());
}

/** The start of the minute after `at`. */
export function nextMinute(at: Date): Date {
  return new Date(Math.floor(at.getTime() / 60_000) * 60_000 + 60_000);
}

/** The URL that runs the scheduled handler for `cron` at `scheduledTime` under `wrangler dev`. */
export function localScheduledUrl(baseUrl: string, cron: string, scheduledTime: Date): string {
  const query = new URLSearchParams({ cron, time: String(scheduledTime.getTime()), format: "json" });
  return `${baseUrl.replace(/\/+$/, "")}/cdn-cgi/local/scheduled?${query}`;
}

export interface CronTickerLog {
  info(message: string): void;
  error(message: string): void;
}

export interface CronTicker {
  /** Resolves after the start-up run (once the Worker answered), or when stopped before it. */
  started: Promise<void>;
  stop(): void;
}

/**
 * Drives `schedules` against the `wrangler dev` at `baseUrl`. A run whose outcome is not `ok`
 * (the handler threw) is logged, as Cloudflare logs a failed invocation; the next minute runs
 * regardless. Runs may overlap, as deployed cron invocations may (the sweep is safe to overlap).
 */
export function startCronTicker(options: {
  baseUrl: string;
  schedules: CronSchedule[];
  log: CronTickerLog;
  /** How long to keep trying the first run while wrangler starts (default 2 minutes). */
  startTimeoutMs?: number;
}): CronTicker {
  const { baseUrl, schedules, log } = options;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const run = (cron: string, scheduledTime: Date) => runScheduled(baseUrl, log, cron, scheduledTime);

  const arm = () => {
    if (stopped) return;
    const at = nextMinute(new Date());
    timer = setTimeout(
      () => {
        for (const cron of dueCrons(schedules, at)) {
          run(cron, at).catch((err) => log.error(`cron "${cron}" could not run: ${err}`));
        }
        arm();
      },
      Math.max(0, at.getTime() - Date.now()),
    );
  };

  const started = startUpRun(schedules, run, log, {
    deadline: Date.now() + (options.startTimeoutMs ?? 120_000),
    stopped: () => stopped,
  });
  // Minute by minute once the Worker is up (a minute that passed during start-up is covered by
  // the start-up run).
  void started.then(arm);

  return {
    started,
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}

/** The crons of `schedules` that run in the minute that holds `at`, in order. */
export function dueCrons(schedules: CronSchedule[], at: Date): string[] {
  return schedules.filter((schedule) => cronMatches(schedule, at)).map((schedule) => schedule.cron);
}

/** The outcome of a local scheduled run from its answer: its JSON `outcome`, else the text itself. */
export function scheduledOutcome(text: string): string {
  try {
    return (JSON.parse(text) as { outcome?: string }).outcome ?? text;
  } catch {
    return text;
  }
}

async function runScheduled(baseUrl: string, log: CronTickerLog, cron: string, scheduledTime: Date) {
  const res = await fetch(localScheduledUrl(baseUrl, cron, scheduledTime));
  const outcome = scheduledOutcome(await res.text());
  if (outcome !== "ok") log.error(`cron "${cron}" at ${scheduledTime.toISOString()}: ${outcome} (${res.status})`);
}

/** The first run of each schedule doubles as the wait for wrangler: refused connections until it listens. */
async function startUpRun(
  schedules: CronSchedule[],
  run: (cron: string, scheduledTime: Date) => Promise<void>,
  log: CronTickerLog,
  until: { deadline: number; stopped: () => boolean },
) {
  for (const schedule of schedules) {
    for (;;) {
      if (until.stopped()) return;
      try {
        await run(schedule.cron, new Date());
        break;
      } catch (err) {
        if (Date.now() > until.deadline) {
          log.error(`cron "${schedule.cron}": the Worker did not answer at start (${err}); runs from the next minute`);
          break;
        }
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }
  if (schedules.length > 0) log.info(`start-up run of ${schedules.map((s) => `"${s.cron}"`).join(", ")} done`);
}
