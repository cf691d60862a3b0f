/** Placeholder: being built. */
export function SettingsPage(_props: { projectId: string }) {
  return <p>Coming soon.</p>;
}
