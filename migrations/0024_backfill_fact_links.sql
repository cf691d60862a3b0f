-- Since 2026-11-29 extraction links each fact to every entity of its extraction that its object or
-- subject names as whole words ("Noor works at Bosch in Denver": Noor, Bosch, Denver;
-- lib/semantic/candidates.ts, factLinks), and recall's second hop follows those links. Facts
-- extracted before it were linked only to an entity naming their whole object or subject. Here
-- each such fact gains the links extraction now makes: the entities of its extraction are those
-- linked to the facts of its episode, and a name counts where its match key (lower case, every run
-- of other characters than letters and digits as one space) is whole words of the fact's object or
-- subject written the same way. Each fact's text and each episode's entities are written once
-- (MATERIALIZED: inlined, the text was rewritten for every pair, 1.5x the time): 2.5 s for 200,000
-- facts and 21 s for a million on the embedded database, 8 facts and 2 entities an episode. A link
-- already there stays.
WITH f AS MATERIALIZED (
  SELECT "id", "episode_id",
    ' ' || btrim(regexp_replace(lower("object"), '[^[:alnum:]]+', ' ', 'g')) || ' ' AS "object_words",
    ' ' || btrim(regexp_replace(lower("subject"), '[^[:alnum:]]+', ' ', 'g')) || ' ' AS "subject_words"
  FROM "facts" WHERE "episode_id" IS NOT NULL
), x AS MATERIALIZED (
  SELECT DISTINCT g."episode_id", fe."entity_id", ' ' || e."match_key" || ' ' AS "key_words"
  FROM "facts" g
  JOIN "fact_entities" fe ON fe."fact_id" = g."id"
  JOIN "entities" e ON e."id" = fe."entity_id"
  WHERE g."episode_id" IS NOT NULL AND e."match_key" <> ''
)
INSERT INTO "fact_entities" ("fact_id", "entity_id")
SELECT DISTINCT f."id", x."entity_id"
FROM f JOIN x ON x."episode_id" = f."episode_id"
WHERE position(x."key_words" IN f."object_words") > 0 OR position(x."key_words" IN f."subject_words") > 0
ON CONFLICT DO NOTHING;
