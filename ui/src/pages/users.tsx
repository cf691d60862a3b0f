import type { Me } from "../app";
/** Placeholder: being built. */
export function UsersPage(_props: { me: Me }) {
  return <p>Coming soon.</p>;
}
