/** Placeholder: being built. */
export function BrowsePage(_props: { projectId: string; parts: string[]; query: URLSearchParams }) {
  return <p>Coming soon.</p>;
}
