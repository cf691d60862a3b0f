import type { ComponentChildren, Ref } from "preact";
import { useId } from "preact/hooks";

/**
 * A heading that can take the focus when a `headingRef` is given: where the keyboard continues
 * after what it was on went away (a deleted row, a revoked key's button).
 */
export function Heading({
  level,
  id,
  headingRef,
  children,
}: {
  level: 1 | 2 | 3;
  id?: string;
  headingRef?: Ref<HTMLHeadingElement>;
  children: ComponentChildren;
}) {
  const Tag = `h${level}` as const;
  return (
    <Tag id={id} ref={headingRef} tabIndex={headingRef ? -1 : undefined}>
      {children}
    </Tag>
  );
}

/**
 * The layout of a management page (projects, users, a project's API keys and webhooks): a titled
 * region, a line saying what it is for, then its create form, its table and its confirmation.
 * Level 1 for a page of its own, 2 for a project's tab (under the project's name).
 */
export function Page({
  title,
  level = 1,
  intro,
  headingRef,
  children,
}: {
  title: string;
  level?: 1 | 2;
  intro?: ComponentChildren;
  headingRef?: Ref<HTMLHeadingElement>;
  children: ComponentChildren;
}) {
  const id = useId();
  return (
    <section aria-labelledby={id}>
      <Heading level={level} id={id} headingRef={headingRef}>
        {title}
      </Heading>
      {intro && <p class="hint">{intro}</p>}
      {children}
    </section>
  );
}
