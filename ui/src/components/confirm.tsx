import { useEffect, useRef, useState } from "preact/hooks";

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
      aria-labelledby="confirm-title"
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
        <h2 id="confirm-title">{title}</h2>
        <p>{message}</p>
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
          <button type="submit" class="danger" disabled={!armed || pending}>
            {pending ? "Working…" : confirmLabel}
          </button>
        </div>
      </form>
    </dialog>
  );
}
