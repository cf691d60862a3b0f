import { useState } from "preact/hooks";

export function CopyButton({ text, label = "Copy" }: { text: string; label?: string }) {
  const [copied, setCopied] = useState<boolean | null>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setCopied(true);
    } catch {
      setCopied(false);
    }
    setTimeout(() => setCopied(null), 2000);
  };
  return (
    <button type="button" onClick={copy}>
      {copied === null ? label : copied ? "Copied" : "Copy failed: select and copy by hand"}
      <span class="visually-hidden" aria-live="polite">
        {copied ? "Copied to the clipboard" : ""}
      </span>
    </button>
  );
}
