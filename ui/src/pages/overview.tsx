/** Placeholder: being built. */
export function OverviewPage(_props: { projectId: string }) {
  return <p>Coming soon.</p>;
}
