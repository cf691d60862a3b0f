/**
 * Who a proposed fact is about. The extraction prompt asks for the subject "user"; models still
 * write the user as "I", "me", "The user" or by name, and those facts are the user's too.
 */

/** How a model refers to the user, once lower-cased and trimmed of punctuation. */
const SELF = new Set(["user", "the user", "this user", "i", "me", "myself", "my", "mine", "i myself"]);

/**
 * Predicates that state the user's name (`name`, `has_name`, `is_called`, `goes_by`...). The same
 * pattern, as POSIX, selects the stored name facts in the stage's claim statement (storedUserNamesSql).
 * Not a bare `called` or `named`: "I called Mom" and "I named my dog Rex" are the user's acts,
 * and taking their objects for the user's names made Mom's and Rex's facts the user's.
 */
export const NAME_PREDICATE =
  "^(user_)?((has_|is_)?(first_|full_|given_|preferred_|nick)?name(_is)?|is_(called|named)|goes_by)$";
const namePredicate = new RegExp(NAME_PREDICATE);

/** Lower case, no surrounding punctuation or quotes, single spaces. */
export function subjectKey(subject: string): string {
  return subject
    .toLowerCase()
    .replace(/\s+/g, " ")
    .replace(/^[^\p{L}\p{N}]+|[^\p{L}\p{N}]+$/gu, "");
}

/** Whether `subject` names the user: a self reference, or a name the user goes by (or its first word). */
export function isUserSubject(subject: string, userNames: readonly string[] = []): boolean {
  const key = subjectKey(subject);
  if (SELF.has(key)) return true;
  return userNames.some((name) => {
    const full = subjectKey(name);
    return full.length > 0 && (key === full || key === full.split(" ")[0]);
  });
}

/** Whether a predicate states the user's name (spaces or hyphens read as underscores). */
export function isNamePredicate(predicate: string): boolean {
  return namePredicate.test(
    predicate
      .trim()
      .toLowerCase()
      .replace(/[\s-]+/g, "_"),
  );
}

/** "My name is Ana", "call me Ana", "I'm called Ana Lima": a capitalised name of one or two words. */
const SELF_INTRODUCTION =
  /(?:^|[^\p{L}])(?:[Mm]y name is|[Mm]y name['’]s|[Cc]all me|I am called|I['’]m called)\s+(\p{Lu}[\p{L}'’-]*(?:\s+\p{Lu}[\p{L}'’-]*)?)/gu;

/**
 * The names the user goes by, as far as the project knows them. No message or thread field
 * carries the user's name (messages have a role, content and metadata limited to stopReason and
 * agentName, the assistant's), so they come from what the user said: a self-introduction in
 * their own messages, a name fact proposed in this extraction, or a name fact already stored.
 * Pass as `proposed` the facts whose quote is the user's words (screenFacts' kept facts): a name
 * fact the screen drops names no one.
 */
export function userNames(input: {
  userLines: readonly string[];
  proposed: readonly { subject: string; predicate: string; object: string }[];
  stored: readonly string[];
}): string[] {
  const said = input.userLines.flatMap((line) => [...line.matchAll(SELF_INTRODUCTION)].map((m) => m[1]));
  const proposed = input.proposed
    .filter((f) => isUserSubject(f.subject) && isNamePredicate(f.predicate))
    .map((f) => f.object);
  return [...new Set([...said, ...proposed, ...input.stored].map((n) => n.trim()).filter(Boolean))];
}
