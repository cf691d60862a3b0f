/** Placeholder: being built. */
export function KeysPage(_props: { projectId: string }) {
  return <p>Coming soon.</p>;
}
