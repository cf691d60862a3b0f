import { useEffect, useState } from "preact/hooks";
import { ApiError, api, unwrap } from "../api/client";
import { Button } from "../components/button";
import { ErrorMessage, Progress } from "../components/status";
import { formatNumber } from "../lib/format";
import { recallRequestOf } from "../lib/recall-request";
import { href, navigate } from "../lib/router";
import { useLoad } from "../lib/use-load";
import { RecallResult } from "./playground-result";
import "./playground.css";

/** The form as typed: strings for the inputs (validated by the browser and then the server). */
interface Form {
  dataset: string;
  query: string;
  limit: string;
  minConfidence: string;
  /** A `datetime-local` value (local time), or "". */
  asOf: string;
  episodes: boolean;
  synthesis: boolean;
  messages: boolean;
}

/** The include checkboxes, in their order on the form. */
const INCLUDES = [
  ["messages", "Messages"],
  ["episodes", "Episodes"],
  ["synthesis", "Synthesis"],
] as const;

const pad = (n: number) => String(n).padStart(2, "0");

/** An ISO instant (or YYYY-MM-DD) as a `datetime-local` value in the browser's time zone. */
function toLocalInput(value: string | null): string {
  if (!value) return "";
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return "";
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function formOf(query: URLSearchParams): Form {
  return {
    dataset: query.get("dataset") ?? "",
    query: query.get("q") ?? "",
    limit: query.get("limit") ?? "",
    minConfidence: query.get("minConfidence") ?? "",
    asOf: toLocalInput(query.get("asOf")),
    episodes: query.get("episodes") === "1",
    synthesis: query.get("synthesis") === "1",
    messages: query.get("messages") === "1",
  };
}

/** The route query for a form: what a shared or reloaded link runs again. */
function queryOf(form: Form) {
  return {
    dataset: form.dataset,
    q: form.query.trim() || undefined,
    limit: form.limit || undefined,
    minConfidence: form.minConfidence || undefined,
    asOf: form.asOf ? new Date(form.asOf).toISOString() : undefined,
    episodes: form.episodes ? 1 : undefined,
    synthesis: form.synthesis ? 1 : undefined,
    messages: form.messages ? 1 : undefined,
  };
}

/**
 * `#/projects/<id>/playground`: runs a recall as an application would, and shows the context block
 * exactly as the model sees it, why each fact ranked where it did, and where the time went. The
 * form lives in the route's query: a link to a recall runs it again.
 */
export function PlaygroundPage({ projectId, query }: { projectId: string; query: URLSearchParams }) {
  const search = query.toString();
  const [form, setForm] = useState<Form>(() => formOf(query));
  // Back, Forward and a pasted link replace what is in the form.
  useEffect(() => setForm(formOf(new URLSearchParams(search))), [search]);

  const datasets = useLoad(
    () => unwrap(api.GET("/dashboard/browse/datasets", { params: { query: { projectId, limit: 100, offset: 0 } } })),
    [projectId],
  );
  const names = datasets.data?.datasets.map((d) => d.dataset) ?? [];
  // The first (most recently active) dataset is the default choice.
  useEffect(() => {
    if (!form.dataset && names.length > 0) setForm((f) => (f.dataset ? f : { ...f, dataset: names[0]! }));
  }, [datasets.data]);

  const parsed = recallRequestOf(new URLSearchParams(search));
  const request = parsed && "request" in parsed ? parsed.request : null;
  const invalid = parsed && "invalid" in parsed ? new ApiError(400, parsed.invalid) : undefined;
  const recall = useLoad(
    async () => {
      if (!request) return null;
      const started = performance.now();
      const body = await unwrap(
        api.POST("/dashboard/projects/{id}/recall", { params: { path: { id: projectId } }, body: request }),
      );
      return { body, request, roundTripMs: performance.now() - started };
    },
    [projectId, search],
    [projectId],
  );
  const running = recall.loading && request !== null;

  const set = <K extends keyof Form>(key: K, value: Form[K]) => setForm((f) => ({ ...f, [key]: value }));
  const submit = (e: Event) => {
    e.preventDefault();
    if (running) return;
    const to = href("projects", projectId, "playground", queryOf(form));
    if (to === location.hash) recall.reload();
    else navigate(to);
  };

  const options = form.dataset && !names.includes(form.dataset) ? [form.dataset, ...names] : names;
  // A text field when the list cannot offer every dataset: none yet, a failed load, or more than
  // one page of them (the older ones are typed; the field suggests the most recently active).
  const total = datasets.data?.total ?? 0;
  const freeText =
    datasets.error !== undefined || (datasets.data !== undefined && (total === 0 || total > names.length));
  return (
    <div class="playground">
      <h2>Recall playground</h2>
      <p class="hint">
        Runs <code>POST /v1/memory/recall</code> for this project, as an application with one of its keys would.
      </p>
      <form class="card recall-form" onSubmit={submit}>
        <div class="recall-fields">
          <div class="field field-dataset">
            <label for="recall-dataset">Dataset</label>
            {freeText ? (
              <input
                id="recall-dataset"
                aria-describedby={names.length > 0 ? "recall-dataset-hint" : undefined}
                list={names.length > 0 ? "recall-dataset-names" : undefined}
                value={form.dataset}
                required
                maxLength={256}
                autoComplete="off"
                onInput={(e) => set("dataset", e.currentTarget.value)}
              />
            ) : (
              <select
                id="recall-dataset"
                value={form.dataset}
                required
                disabled={datasets.data === undefined}
                onChange={(e) => set("dataset", e.currentTarget.value)}
              >
                {datasets.data === undefined && (
                  <option value={form.dataset}>{form.dataset || "Loading datasets…"}</option>
                )}
                {datasets.data !== undefined &&
                  options.map((name) => (
                    <option key={name} value={name}>
                      {name}
                    </option>
                  ))}
              </select>
            )}
            {freeText && names.length > 0 && (
              <>
                <datalist id="recall-dataset-names">
                  {names.map((name) => (
                    <option key={name} value={name} />
                  ))}
                </datalist>
                <small id="recall-dataset-hint">
                  {formatNumber(total)} datasets: type a name (the {formatNumber(names.length)} most recently active are
                  suggested).
                </small>
              </>
            )}
            {freeText && !datasets.error && names.length === 0 && <small>No datasets yet: type a name.</small>}
          </div>
          <div class="field field-query">
            <label for="playground-query">Query</label>
            <textarea
              id="playground-query"
              aria-describedby="playground-query-hint"
              value={form.query}
              rows={3}
              maxLength={2000}
              onInput={(e) => set("query", e.currentTarget.value)}
            />
            <small id="playground-query-hint">Drives ranking. Leave empty for the most recent facts.</small>
          </div>
          <div class="field">
            <label for="playground-limit">Limit</label>
            <input
              id="playground-limit"
              aria-describedby="playground-limit-hint"
              type="number"
              inputMode="numeric"
              min={1}
              max={100}
              step={1}
              value={form.limit}
              placeholder="8"
              onInput={(e) => set("limit", e.currentTarget.value)}
            />
            <small id="playground-limit-hint">1-100; default the project's factsInContext.</small>
          </div>
          <div class="field">
            <label for="playground-min-confidence">Minimum confidence</label>
            <input
              id="playground-min-confidence"
              aria-describedby="playground-min-confidence-hint"
              type="number"
              inputMode="decimal"
              min={0}
              max={1}
              step={0.01}
              value={form.minConfidence}
              placeholder="0.5"
              onInput={(e) => set("minConfidence", e.currentTarget.value)}
            />
            <small id="playground-min-confidence-hint">0-1; default the project's retrievalMinConfidence.</small>
          </div>
          <div class="field">
            <label for="playground-as-of">As of</label>
            <input
              id="playground-as-of"
              aria-describedby="playground-as-of-hint"
              type="datetime-local"
              value={form.asOf}
              onInput={(e) => set("asOf", e.currentTarget.value)}
            />
            <small id="playground-as-of-hint">Optional: only facts true then (your time zone).</small>
          </div>
          <fieldset class="field include">
            <legend>Include</legend>
            {INCLUDES.map(([key, label]) => (
              <label class="check" key={key}>
                <input type="checkbox" checked={form[key]} onChange={(e) => set(key, e.currentTarget.checked)} />
                {label}
              </label>
            ))}
            <small>
              Messages: the conversation's best matches, in the block (the TypeScript and MCP clients ask for them by
              default). Synthesis adds a model call (1-3 s).
            </small>
          </fieldset>
        </div>
        <div class="actions">
          <Button type="submit" class="primary" disabled={running}>
            {running ? "Running…" : "Run recall"}
          </Button>
        </div>
      </form>
      <ErrorMessage error={datasets.error} />
      <div class="recall-output">
        <Progress active={running} label="Running recall" />
        <ErrorMessage error={invalid ?? (request ? recall.error : undefined)} />
        {/* A failed run's previous result is not shown as if it were this one's. */}
        {recall.data && !recall.error && <RecallResult {...recall.data} />}
        {!parsed && <p class="empty">Choose a dataset and run a recall to see what the model would be given.</p>}
      </div>
    </div>
  );
}
