import { useEffect, useId, useRef, useState } from "preact/hooks";
import { ApiError } from "../api/client";
import { useAction } from "../lib/use-load";
import { Button } from "./button";

/**
 * A confirmation for what cannot be undone. With `typed`, the operator types that word (a
 * project's name) before the button arms: deleting a project cascades to everything in it.
 */
export function ConfirmDialog({
  open,
  title,
  message,
  typed,
  confirmLabel,
  pending,
  onConfirm,
  onClose,
  focusAfterConfirm,
}: {
  open: boolean;
  title: string;
  message: string;
  typed?: string;
  confirmLabel: string;
  pending?: boolean;
  onConfirm: () => void;
  onClose: () => void;
  /**
   * Where the focus goes once the dialog closes after a confirmation: the button that opened it
   * usually goes with what it removed, and the browser would hand the focus back to nothing.
   */
  focusAfterConfirm?: { current: HTMLElement | null };
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const id = useId();
  const [value, setValue] = useState("");
  const confirmed = useRef(false);
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (open && !dialog.open) {
      setValue("");
      confirmed.current = false;
      dialog.showModal();
    } else if (!open && dialog.open) dialog.close();
  }, [open]);
  const armed = typed === undefined || value === typed;
  return (
    <dialog
      ref={ref}
      class="dialog"
      onClose={() => {
        onClose();
        // After the dialog has given the focus back to the button that opened it.
        if (confirmed.current) focusAfterConfirm?.current?.focus();
      }}
      aria-labelledby={`${id}-title`}
      aria-describedby={`${id}-message`}
    >
      <form
        method="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          if (!armed || pending) return;
          confirmed.current = true;
          onConfirm();
        }}
      >
        <h2 id={`${id}-title`}>{title}</h2>
        <p id={`${id}-message`}>{message}</p>
        {typed !== undefined && (
          <label class="field">
            <span>
              Type <strong>{typed}</strong> to confirm
            </span>
            <input value={value} onInput={(e) => setValue(e.currentTarget.value)} autoComplete="off" />
          </label>
        )}
        <div class="actions">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <Button type="submit" class="danger" disabled={!armed || pending}>
            {pending ? "Working…" : confirmLabel}
          </Button>
        </div>
      </form>
    </dialog>
  );
}

/**
 * A destructive action behind a ConfirmDialog: `ask(item)` opens the dialog for it (or, when
 * `refuse` names a reason the server would refuse it for, says so instead of asking), confirming
 * runs `action`, and the dialog closes either way: an error is shown on the page, not behind the
 * modal's backdrop. Spread `dialog` into the ConfirmDialog.
 */
export function useConfirm<T>(
  action: (item: T) => Promise<unknown>,
  { refuse }: { refuse?: (item: T) => string | undefined } = {},
) {
  const [target, setTarget] = useState<{ item: T } | null>(null);
  const [refusal, setRefusal] = useState<ApiError>();
  const act = useAction(action);
  return {
    /** What the dialog is open for. */
    target: target?.item,
    ask: (item: T) => {
      act.clearError();
      const reason = refuse?.(item);
      setRefusal(reason === undefined ? undefined : new ApiError(400, reason));
      if (reason === undefined) setTarget({ item });
    },
    error: refusal ?? act.error,
    clearError: () => {
      act.clearError();
      setRefusal(undefined);
    },
    dialog: {
      open: target !== null,
      pending: act.pending,
      onConfirm: () => {
        if (target) void act.run(target.item).then(() => setTarget(null));
      },
      onClose: () => setTarget(null),
    },
  };
}
