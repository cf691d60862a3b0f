import type { ButtonHTMLAttributes } from "preact";

/**
 * A button that keeps the keyboard's focus while it cannot act (its request is running, a pager
 * at its last page, an unarmed confirmation): `disabled` would drop the focus to the page's top.
 * It says so with `aria-disabled` (styled as :disabled) and swallows the click, and with it the
 * form submission a submit button's click (or Enter in a field) would start.
 */
export function Button({
  disabled = false,
  onClick,
  type = "button",
  ...props
}: Omit<ButtonHTMLAttributes<HTMLButtonElement>, "disabled" | "onClick" | "type"> & {
  disabled?: boolean;
  onClick?: () => void;
  type?: "button" | "submit";
}) {
  return (
    <button
      {...props}
      type={type}
      aria-disabled={disabled ? "true" : undefined}
      onClick={(e) => {
        if (disabled) e.preventDefault();
        else onClick?.();
      }}
    />
  );
}
