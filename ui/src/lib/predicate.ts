/**
 * A predicate as the model writes it (`lives_in`, `works_at`, now and then `worksAt`) read as
 * words: "lives in", "works at". Only the separators change: a run of underscores or spaces becomes
 * one space, and a camelCase step becomes a space with its capital lowered; other capitals
 * ("visited_NYC") stay. Pages show this and keep the raw predicate in a title attribute.
 */
export function formatPredicate(predicate: string): string {
  const words = predicate
    .replace(
      /(\p{Ll}|\p{N})(\p{Lu})(?=\p{Ll})/gu,
      (_, before: string, capital: string) => `${before} ${capital.toLowerCase()}`,
    )
    .replace(/[_\s]+/g, " ")
    .trim();
  return words || predicate;
}
