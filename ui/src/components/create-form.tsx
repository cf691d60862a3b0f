import type { ComponentChildren, PartialInputHTMLAttributes, Ref } from "preact";
import { useEffect, useId, useRef } from "preact/hooks";
import type { ApiError } from "../api/client";
import { Button } from "./button";
import { CopyButton } from "./copy-button";
import { Heading } from "./page";
import { ErrorMessage } from "./status";

/**
 * A page's create form: its fields, one submit button that says when it is working, and the
 * server's refusal under it. Named by a visible heading (`headingLevel`) or, when the page says
 * enough around it, by `label` alone. `status`, when given, is a live region for the outcome
 * (present from the start, so a screen reader announces what is written into it).
 */
export function CreateForm({
  label,
  headingLevel,
  action,
  submitLabel,
  pendingLabel = "Creating…",
  disabled = false,
  class: className,
  status,
  children,
}: {
  label: string;
  headingLevel?: 2 | 3;
  action: { run: () => Promise<boolean>; pending: boolean; error: ApiError | undefined };
  submitLabel: string;
  pendingLabel?: string;
  disabled?: boolean;
  class?: string;
  status?: string | null;
  children: ComponentChildren;
}) {
  const id = useId();
  return (
    <>
      {headingLevel && (
        <Heading level={headingLevel} id={id}>
          {label}
        </Heading>
      )}
      <form
        class={className ? `inline-form ${className}` : "inline-form"}
        aria-label={headingLevel ? undefined : label}
        aria-labelledby={headingLevel ? id : undefined}
        onSubmit={(e) => {
          e.preventDefault();
          if (!action.pending && !disabled) void action.run();
        }}
      >
        {children}
        <Button type="submit" class="primary" disabled={action.pending || disabled}>
          {action.pending ? pendingLabel : submitLabel}
        </Button>
      </form>
      <ErrorMessage error={action.error} />
      {status !== undefined && (
        <p role="status" class="create-status">
          {status ?? ""}
        </p>
      )}
    </>
  );
}

/**
 * A labelled input of a create form, with its hint read out with it. A required text field
 * refuses blanks: spaces alone pass `required`, and the server trims them and says "Too small".
 */
export function TextField({
  label,
  hint,
  inputRef,
  type = "text",
  ...input
}: {
  label: string;
  hint?: ComponentChildren;
  inputRef?: Ref<HTMLInputElement>;
  type?: "text" | "url" | "password";
} & Pick<
  PartialInputHTMLAttributes<HTMLInputElement>,
  "name" | "autoComplete" | "value" | "required" | "minLength" | "maxLength" | "placeholder" | "onInput"
>) {
  const id = useId();
  // Preact's types pair each input type with the ARIA roles it may take; this input takes none.
  const inputType = type as "text";
  const notBlank = type === "text" && input.required;
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <input
        {...input}
        type={inputType}
        id={id}
        ref={inputRef}
        pattern={notBlank ? ".*\\S.*" : undefined}
        title={notBlank ? `${label}: not only spaces` : undefined}
        aria-describedby={hint ? `${id}-hint` : undefined}
      />
      {hint && <small id={`${id}-hint`}>{hint}</small>}
    </div>
  );
}

/**
 * What a create returns once and never again (an API key, a webhook's signing secret): it takes
 * the focus when shown, so a screen reader announces it and Copy is one Tab away; Done hides it.
 * `headingRef` lets the caller focus its heading again (after a dialog that gave the focus back
 * to the button that opened it).
 */
export function ShownOnce({
  title,
  name,
  secret,
  secretLabel,
  copyLabel,
  note,
  onDone,
  headingRef,
  children,
}: {
  title: string;
  /** What was created, under the title. */
  name?: string;
  secret: string;
  secretLabel: string;
  copyLabel: string;
  /** After "Copy it now: it will not be shown again.": what to do with it, and if it is lost. */
  note: ComponentChildren;
  onDone: () => void;
  headingRef?: { current: HTMLHeadingElement | null };
  children?: ComponentChildren;
}) {
  const id = useId();
  const own = useRef<HTMLHeadingElement>(null);
  const heading = headingRef ?? own;
  useEffect(() => {
    heading.current?.focus();
  }, [secret]);
  return (
    <section class="card shown-once" aria-labelledby={id}>
      <Heading level={3} id={id} headingRef={heading}>
        {title}
      </Heading>
      {name !== undefined && (
        <p class="shown-once-name">
          <span class="visually-hidden">Name: </span>
          {name}
        </p>
      )}
      <div class="shown-once-row">
        <output aria-label={secretLabel} class="mono shown-once-secret">
          {secret}
        </output>
        <CopyButton text={secret} label={copyLabel} />
      </div>
      <p class="shown-once-note">
        <strong>Copy it now: it will not be shown again.</strong> {note}
      </p>
      {children}
      <div class="actions">
        <button type="button" class="primary" onClick={onDone}>
          Done
        </button>
      </div>
    </section>
  );
}
