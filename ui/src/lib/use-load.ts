import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { ApiError } from "../api/client";

export interface Load<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loading: boolean;
  /** Loads again (after a change), keeping the current data on screen meanwhile. */
  reload: () => void;
}

/**
 * Data for a page: loads when `key` changes and drops answers that arrive after a newer request
 * started. While it reloads, the previous data (or error) stays on screen, so nothing shifts,
 * but only within its `scope` (by default the key itself): what was loaded for another project
 * or dataset is never shown under the new one. A list's scope leaves out its page and filters,
 * so paging keeps the rows (and the pager, and its focus) until the next page arrives.
 */
export function useLoad<T>(load: () => Promise<T>, key: unknown[], scope: unknown[] = key): Load<T> {
  const scopeId = JSON.stringify(scope);
  const [state, setState] = useState<{ scopeId?: string; data?: T; error?: ApiError; loading: boolean }>({
    loading: true,
  });
  const generation = useRef(0);
  const run = useCallback(() => {
    const mine = ++generation.current;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => mine === generation.current && setState({ scopeId, data, loading: false }),
      (error: unknown) =>
        mine === generation.current &&
        setState((s) => ({
          scopeId,
          data: s.scopeId === scopeId ? s.data : undefined,
          loading: false,
          error: error instanceof ApiError ? error : new ApiError(0, String(error)),
        })),
    );
    // The caller's key decides when to load again.
  }, key);
  useEffect(run, [run]);
  if (state.scopeId !== undefined && state.scopeId !== scopeId)
    return { data: undefined, error: undefined, loading: true, reload: run };
  return { data: state.data, error: state.error, loading: state.loading, reload: run };
}

/** True once `active` has lasted `ms`: progress is shown only for what is slower than 200 ms. */
export function useDelayed(active: boolean, ms = 200): boolean {
  const [shown, setShown] = useState(false);
  useEffect(() => {
    if (!active) {
      setShown(false);
      return;
    }
    const timer = setTimeout(() => setShown(true), ms);
    return () => clearTimeout(timer);
  }, [active, ms]);
  return shown;
}

/**
 * An action started by a button (save, delete, revoke): its pending state for the button and its
 * error for the message next to it.
 */
export function useAction<A extends unknown[]>(action: (...args: A) => Promise<unknown>) {
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<ApiError>();
  const run = async (...args: A) => {
    setPending(true);
    setError(undefined);
    try {
      await action(...args);
      return true;
    } catch (err) {
      setError(err instanceof ApiError ? err : new ApiError(0, String(err)));
      return false;
    } finally {
      setPending(false);
    }
  };
  return { run, pending, error, clearError: () => setError(undefined) };
}
