// @ts-expect-error: the package ships no types; its one function is typed below.
import parsePrometheusTextFormat from "parse-prometheus-text-format";

/**
 * The Prometheus text format, parsed by a parser of its own (parse-prometheus-text-format), not
 * by the code that wrote it (prom-client has no parser): the families /metrics exposes, by name.
 *
 * That parser folds every series of a histogram into one sample without labels, which loses a
 * labelled histogram's series; so a histogram's series are read a second time with its TYPE line
 * set to untyped, where each `_bucket`, `_sum` and `_count` series keeps its labels (as families
 * named so, e.g. `http_request_duration_seconds_count`).
 */
export interface Sample {
  labels?: Record<string, string>;
  value?: string;
}
export interface Family {
  name: string;
  help: string;
  type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED";
  metrics: Sample[];
}

const parse = parsePrometheusTextFormat as (text: string) => Family[];

export function parseMetrics(text: string): Map<string, Family> {
  const families = new Map(parse(text).map((f) => [f.name, f]));
  const histograms = [...families.values()].filter((f) => f.type === "HISTOGRAM").map((f) => f.name);
  const retyped = text.replace(/^# TYPE (\S+) histogram$/gm, "# TYPE $1 untyped");
  for (const series of parse(retyped)) {
    if (!histograms.some((h) => series.name.startsWith(`${h}_`))) continue;
    const seen = families.get(series.name);
    if (seen) seen.metrics.push(...series.metrics);
    else families.set(series.name, series);
  }
  return families;
}

/** The sample of `family` whose labels include `labels` (undefined when none has them). */
export function sampleOf(families: Map<string, Family>, family: string, labels: Record<string, string> = {}) {
  return families.get(family)?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
}

/** A sample's value (0 when the sample is absent: nothing counted yet). */
export function metricValue(families: Map<string, Family>, family: string, labels: Record<string, string> = {}) {
  return Number(sampleOf(families, family, labels)?.value ?? 0);
}
