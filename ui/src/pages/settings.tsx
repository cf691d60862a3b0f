import { useEffect, useRef, useState } from "preact/hooks";
import { api, type Schemas, unwrap } from "../api/client";
import type { paths } from "../api/schema";
import { Button } from "../components/button";
import { ErrorMessage, Progress } from "../components/status";
import { formatNumber } from "../lib/format";
import { useAction, useLoad } from "../lib/use-load";
import "./settings.css";

type Field = Schemas["SettingField"];
type Value = Field["value"];
type SettingsPatch = NonNullable<
  paths["/dashboard/projects/{id}/settings"]["patch"]["requestBody"]
>["content"]["application/json"];
/** What the operator has typed or ticked: a checkbox's state, a number's text, or null for "None (off)". */
type Draft = boolean | string | null;

const GROUPS: Record<string, { title: string; hint: string }> = {
  working: { title: "Working memory", hint: "How long threads are compacted." },
  episodic: { title: "Episodes", hint: "How conversations are cut into episodes and which ones recall returns." },
  semantic: { title: "Facts and recall", hint: "How facts and entities are extracted, deduplicated and recalled." },
  usage: {
    title: "Usage",
    hint: "A monthly token budget: when spent, extraction waits, synthesis is skipped and chat answers 429 (the Usage tab shows what was spent).",
  },
};

const fieldId = (f: Field) => `${f.group}.${f.key}`;
const inputId = (f: Field) => `setting-${f.group}-${f.key}`;
const noneId = (f: Field) => `${inputId(f)}-none`;

/** `autoEpisodeIntervalMs` -> "Auto episode interval (ms)" */
function humanise(key: string): string {
  const words = key
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2")
    .toLowerCase()
    .split(" ");
  const unit = words.at(-1) === "ms" && words.length > 1 ? words.pop() : undefined;
  const text = words.join(" ");
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}${unit ? ` (${unit})` : ""}`;
}

function bounds(f: Field): string | null {
  if (f.type === "boolean") return null;
  const { minimum: min, maximum: max } = f;
  if (min !== null && max !== null) return `${formatNumber(min)}–${formatNumber(max)}`;
  if (min !== null) return `${formatNumber(min)} or more`;
  if (max !== null) return `${formatNumber(max)} or less`;
  return null;
}

function show(f: Field, v: Value): string {
  if (v === null) return "None (off)";
  if (typeof v === "boolean") return v ? "On" : "Off";
  return f.key.endsWith("Ms") ? `${formatNumber(v)} (${duration(v)})` : formatNumber(v);
}

/** 1800000 -> "30 min": milliseconds a person can read. */
function duration(ms: number): string {
  if (ms >= 3_600_000 && ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000} min`;
  if (ms >= 1000 && ms % 1000 === 0) return `${ms / 1000} s`;
  return `${formatNumber(ms)} ms`;
}

/** The value a draft stands for, or why it cannot be sent (the same bounds PATCH checks). */
function check(f: Field, draft: Draft): { value: Value } | { error: string } {
  if (typeof draft === "boolean") return { value: draft };
  if (draft === null) return f.nullable ? { value: null } : { error: "A value is required." };
  const text = draft.trim();
  const n = Number(text);
  const range = bounds(f);
  const expected = `${f.type === "integer" ? "a whole number" : "a number"}${range ? ` (${range})` : ""}`;
  if (text === "" || !Number.isFinite(n)) return { error: `Enter ${expected}.` };
  if (f.type === "integer" && !Number.isInteger(n)) return { error: `Enter ${expected}.` };
  if ((f.minimum !== null && n < f.minimum) || (f.maximum !== null && n > f.maximum))
    return { error: `Out of range: enter ${expected}.` };
  return { value: n };
}

/**
 * A project's settings, one fieldset per group, every field with its description, bounds and
 * default. Values are checked against the server's own bounds before saving, and only what
 * changed is sent.
 */
export function SettingsPage({ projectId }: { projectId: string }) {
  const load = useLoad(
    () =>
      unwrap(api.GET("/dashboard/projects/{id}/settings/fields", { params: { path: { id: projectId } } })).then(
        (body) => body.fields,
      ),
    [projectId],
  );
  const fields = load.data;
  const [drafts, setDrafts] = useState<Record<string, Draft>>({});
  const [attempted, setAttempted] = useState(false);
  /** Fields left (blurred) since they changed: their errors show from then on, not while typing. */
  const [touched, setTouched] = useState<Set<string>>(new Set());
  /** What the last save or reset did ("Saved"), until the next edit. */
  const [done, setDone] = useState<string | null>(null);

  /** Runs once the reload after a save or a reset has arrived, so old values never flash back. */
  const afterReload = useRef<(() => void) | null>(null);
  useEffect(() => {
    afterReload.current?.();
    afterReload.current = null;
  }, [fields]);

  // Another project starts clean.
  useEffect(() => {
    setDrafts({});
    setAttempted(false);
    setTouched(new Set());
    setDone(null);
  }, [projectId]);

  // What changed, and what of it is invalid.
  const changes: { field: Field; value: Value }[] = [];
  const invalid: Record<string, string> = {};
  for (const f of fields ?? []) {
    const id = fieldId(f);
    if (!(id in drafts)) continue;
    const result = check(f, drafts[id]!);
    if ("error" in result) invalid[id] = result.error;
    else if (result.value !== f.value) changes.push({ field: f, value: result.value });
  }
  const changed = new Set(changes.map((c) => fieldId(c.field)));
  const pendingCount = changes.length + Object.keys(invalid).length;

  const save = useAction(async (patch: SettingsPatch) => {
    await unwrap(api.PATCH("/dashboard/projects/{id}/settings", { params: { path: { id: projectId } }, body: patch }));
    afterReload.current = () => {
      setDrafts({});
      setAttempted(false);
      setTouched(new Set());
      setDone("Saved");
    };
    load.reload();
  });
  const [resetting, setResetting] = useState<string | null>(null);
  const reset = useAction(async (f: Field) => {
    setResetting(fieldId(f));
    try {
      await unwrap(
        api.DELETE("/dashboard/projects/{id}/settings/{group}/{key}", {
          params: { path: { id: projectId, group: f.group, key: f.key } },
        }),
      );
    } finally {
      setResetting(null);
    }
    afterReload.current = () => {
      setDrafts(({ [fieldId(f)]: _, ...rest }) => rest);
      setDone(`${humanise(f.key)} reset to default`);
      // The button is gone once the override is: the field itself keeps the focus, its None
      // checkbox when the default is None (the number input is disabled then).
      const input = document.getElementById(inputId(f)) as HTMLInputElement | null;
      (input?.disabled ? document.getElementById(noneId(f)) : input)?.focus();
    };
    load.reload();
  });

  // The server's issues (400) under the fields they name, besides the summary at the top.
  const serverIssues: Record<string, string> = {};
  for (const issue of save.error?.issues ?? []) serverIssues[issue.path.join(".")] ??= issue.message;

  const edit = (f: Field, draft: Draft) => {
    setDone(null);
    save.clearError();
    reset.clearError();
    setDrafts((d) => ({ ...d, [fieldId(f)]: draft }));
  };

  const submit = () => {
    if (save.pending) return;
    setAttempted(true);
    setDone(null);
    reset.clearError();
    const firstInvalid = fields?.find((f) => invalid[fieldId(f)]);
    if (firstInvalid) {
      document.getElementById(inputId(firstInvalid))?.focus();
      return;
    }
    if (changes.length === 0) return;
    const patch: Record<string, Record<string, Value>> = {};
    for (const { field, value } of changes) patch[field.group] = { ...patch[field.group], [field.key]: value };
    void save.run(patch as SettingsPatch);
  };

  const groups: [string, Field[]][] = [];
  for (const f of fields ?? []) {
    const group = groups.find(([g]) => g === f.group);
    if (group) group[1].push(f);
    else groups.push([f.group, [f]]);
  }

  const status = save.pending
    ? ""
    : done
      ? done
      : attempted && Object.keys(invalid).length > 0
        ? `Fix ${Object.keys(invalid).length === 1 ? "the highlighted field" : `${Object.keys(invalid).length} highlighted fields`} to save.`
        : attempted && changes.length === 0
          ? "Nothing to save: no value changed."
          : pendingCount > 0
            ? `${pendingCount} unsaved ${pendingCount === 1 ? "change" : "changes"}`
            : "";

  return (
    <section aria-labelledby="settings-title" class="settings-page">
      <h2 id="settings-title">Settings</h2>
      <p class="hint">
        Defaults apply until a project sets its own value. Changes take effect for new work; threads keep their own
        episodic overrides.
      </p>
      <Progress active={load.loading} label="Loading settings" />
      <ErrorMessage error={load.error} />
      {!fields && !load.error && <div class="settings-placeholder" aria-hidden="true" />}
      {fields && (
        <form
          class="settings-form"
          noValidate
          onSubmit={(e) => {
            e.preventDefault();
            submit();
          }}
        >
          {groups.map(([group, list]) => (
            <fieldset key={group} class="card settings-group">
              <legend>{GROUPS[group]?.title ?? humanise(group)}</legend>
              {GROUPS[group] && <p class="hint settings-group-hint">{GROUPS[group].hint}</p>}
              {list.map((f) => (
                <SettingInput
                  key={fieldId(f)}
                  field={f}
                  draft={drafts[fieldId(f)]}
                  changed={changed.has(fieldId(f))}
                  error={
                    (attempted || touched.has(fieldId(f)) ? invalid[fieldId(f)] : undefined) ?? serverIssues[fieldId(f)]
                  }
                  resetting={resetting === fieldId(f)}
                  resetDisabled={reset.pending || save.pending}
                  onChange={(draft) => edit(f, draft)}
                  onBlur={() => fieldId(f) in drafts && setTouched((t) => new Set(t).add(fieldId(f)))}
                  onReset={() => void reset.run(f)}
                />
              ))}
            </fieldset>
          ))}
          <div class="settings-actions">
            <ErrorMessage error={save.error ?? reset.error} />
            <div class="settings-actions-row">
              <p role="status" class={`settings-status${done ? " settings-saved" : ""}`}>
                {status}
              </p>
              <Button
                disabled={Object.keys(drafts).length === 0 || save.pending}
                onClick={() => {
                  setDrafts({});
                  setAttempted(false);
                  setTouched(new Set());
                  save.clearError();
                }}
              >
                Discard changes
              </Button>
              <Button type="submit" class="primary" disabled={save.pending}>
                {save.pending ? "Saving…" : "Save changes"}
              </Button>
            </div>
          </div>
        </form>
      )}
    </section>
  );
}

function SettingInput({
  field: f,
  draft,
  changed,
  error,
  resetting,
  resetDisabled,
  onChange,
  onBlur,
  onReset,
}: {
  field: Field;
  draft: Draft | undefined;
  changed: boolean;
  error: string | undefined;
  resetting: boolean;
  resetDisabled: boolean;
  onChange: (draft: Draft) => void;
  onBlur: () => void;
  onReset: () => void;
}) {
  const id = inputId(f);
  const label = humanise(f.key);
  const range = bounds(f);
  const describedBy = [`${id}-description`, `${id}-meta`, error ? `${id}-error` : ""].filter(Boolean).join(" ");
  const current: Draft = draft === undefined ? (typeof f.value === "number" ? String(f.value) : f.value) : draft;
  const isNone = current === null;
  const lastNumber = useRef(typeof f.default === "number" ? String(f.default) : "");
  if (typeof current === "string") lastNumber.current = current;

  return (
    <div class={`settings-field${error ? " settings-field-invalid" : ""}`}>
      <div class="settings-head">
        {f.type === "boolean" ? (
          <label class="settings-check settings-label">
            <input
              id={id}
              type="checkbox"
              checked={current === true}
              aria-describedby={describedBy}
              aria-invalid={error ? true : undefined}
              onChange={(e) => onChange(e.currentTarget.checked)}
            />
            {label}
          </label>
        ) : (
          <label class="settings-label" for={id}>
            {label}
          </label>
        )}
        {f.overridden && <span class="badge warn">Overridden</span>}
        {changed && <span class="badge muted">Changed</span>}
      </div>

      {f.type !== "boolean" && (
        <div class="settings-control">
          <input
            id={id}
            type="number"
            inputMode={f.type === "integer" ? "numeric" : "decimal"}
            min={f.minimum ?? undefined}
            max={f.maximum ?? undefined}
            step={f.type === "integer" ? 1 : "any"}
            value={isNone ? "" : String(current)}
            disabled={isNone}
            placeholder={isNone ? "None" : undefined}
            aria-describedby={describedBy}
            aria-invalid={error ? true : undefined}
            onInput={(e) => onChange(e.currentTarget.value)}
            onBlur={onBlur}
          />
          {f.nullable && (
            <label class="settings-check">
              <input
                id={noneId(f)}
                type="checkbox"
                checked={isNone}
                aria-label={`${label}: None (off)`}
                onChange={(e) => onChange(e.currentTarget.checked ? null : lastNumber.current)}
              />
              None (off)
            </label>
          )}
          {typeof current === "string" && f.key.endsWith("Ms") && Number(current) > 0 && (
            <span class="hint" aria-hidden="true">
              = {duration(Number(current))}
            </span>
          )}
        </div>
      )}

      {error && (
        <p id={`${id}-error`} class="settings-error">
          {error}
        </p>
      )}
      <p id={`${id}-description`} class="settings-description">
        {f.description}
      </p>
      <p id={`${id}-meta`} class="settings-meta">
        {range && (
          <span>
            Range <span class="settings-nowrap">{range}</span>
            {f.type === "integer" ? ", whole numbers" : ""}
            {f.nullable ? ", or None (off)" : ""}
          </span>
        )}
        <span>
          Default <span class="settings-nowrap">{show(f, f.default)}</span>
        </span>
      </p>
      {f.overridden && (
        <Button class="link settings-reset" disabled={resetDisabled} onClick={onReset}>
          {resetting ? (
            "Resetting…"
          ) : (
            <>
              Reset to default<span class="visually-hidden"> ({label})</span>
            </>
          )}
        </Button>
      )}
    </div>
  );
}
