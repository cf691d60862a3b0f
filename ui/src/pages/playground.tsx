/** Placeholder: being built. */
export function PlaygroundPage(_props: { projectId: string; query: URLSearchParams }) {
  return <p>Coming soon.</p>;
}
