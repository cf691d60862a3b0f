import type { ComponentChildren } from "preact";
import type { ApiError } from "../api/client";
import { useDelayed } from "../lib/use-load";
import { Button } from "./button";

/**
 * A thin progress bar at the top of a region, shown only after 200 ms. It takes no space, so
 * showing and hiding it never moves the page.
 */
export function Progress({ active, label = "Loading" }: { active: boolean; label?: string }) {
  const shown = useDelayed(active);
  return (
    <div class="progress" role="progressbar" aria-label={label} aria-busy={shown} hidden={!shown}>
      <div class="progress-bar" />
    </div>
  );
}

/** The server's message, and its validation issues by field when there are any. */
export function ErrorMessage({ error }: { error: ApiError | undefined }) {
  if (!error) return null;
  return (
    <div class="error" role="alert">
      <strong>{error.message}</strong>
      {error.issues.length > 0 && (
        <ul>
          {error.issues.map((issue) => (
            <li key={`${issue.path.join(".")}:${issue.message}`}>
              {issue.path.length > 0 && <code>{issue.path.join(".")}</code>} {issue.message}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}

/** Offset paging for the dashboard lists (`limit`, `offset`, `total`). */
export function Pager({
  offset,
  limit,
  total,
  onChange,
  label = "Pages",
}: {
  offset: number;
  limit: number;
  total: number;
  onChange: (offset: number) => void;
  label?: string;
}) {
  if (total <= limit && offset === 0) return null;
  const last = Math.max(0, total - 1);
  return (
    <nav class="pager" aria-label={label}>
      <Button disabled={offset === 0} onClick={() => onChange(Math.max(0, offset - limit))}>
        Previous
      </Button>
      <span>
        {total === 0 ? 0 : offset + 1}–{Math.min(offset + limit, total)} of {total}
      </span>
      <Button disabled={offset + limit > last} onClick={() => onChange(offset + limit)}>
        Next
      </Button>
    </nav>
  );
}
