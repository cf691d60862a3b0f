import { useEffect, useState } from "preact/hooks";

/**
 * Hash routes (`#/projects/p1/facts?dataset=x`): the page paths never reach the server, so none
 * can collide with the /dashboard/* API, and both hosts serve one index.html.
 */
export interface Route {
  /** Path segments after `#/`, decoded. */
  parts: string[];
  query: URLSearchParams;
}

export function parseHash(hash: string): Route {
  const [path = "", search = ""] = hash.replace(/^#\/?/, "").split("?", 2);
  return {
    parts: path.split("/").filter(Boolean).map(decodeSegment),
    query: new URLSearchParams(search),
  };
}

/** A path segment decoded; one with a malformed escape (`%E0%A4%A`, a hand-edited link) as it is. */
function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/** `href("projects", id, "facts", {dataset})` -> `#/projects/<id>/facts?dataset=...` */
export function href(...args: (string | Record<string, string | number | boolean | undefined | null>)[]): string {
  const parts = args.filter((a): a is string => typeof a === "string").map(encodeURIComponent);
  const params = args.find((a): a is Record<string, string> => typeof a === "object" && a !== null);
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params ?? {}))
    if (v !== undefined && v !== null && v !== "") query.set(k, String(v));
  const qs = query.toString();
  return `#/${parts.join("/")}${qs ? `?${qs}` : ""}`;
}

/**
 * Where sign-in leads: `next` when it is one of this app's own hash routes (never another page or
 * site: it comes from the address bar), else the projects. Sign-in itself is no destination.
 */
export function afterSignIn(next: string | null): string {
  if (next?.startsWith("#/") && parseHash(next).parts[0] !== "sign-in") return next;
  return href("projects");
}

export function navigate(to: string, options: { replace?: boolean } = {}) {
  if (options.replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  window.dispatchEvent(new HashChangeEvent("hashchange"));
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(location.hash));
  useEffect(() => {
    const update = () => setRoute(parseHash(location.hash));
    window.addEventListener("hashchange", update);
    return () => window.removeEventListener("hashchange", update);
  }, []);
  return route;
}
