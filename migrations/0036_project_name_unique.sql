ALTER TABLE "projects" ADD COLUMN "name_key" text;--> statement-breakpoint
-- Project names are unique from now on, compared trimmed and case-insensitively: "name_key" is
-- lower(btrim(name)), under a unique index, and a create that repeats a name is refused (409).
-- Projects made before could share a name: none is renamed or dropped here (the admin command
-- line finds a project by its name, and refuses a name several share), so this cannot fail on
-- them. The oldest project of each name takes the key; a later one with the same name keeps a
-- null key (a unique index never compares nulls), and lib/projects.ts refuses a new project named
-- as one of them too.
UPDATE "projects" p SET "name_key" = k."key"
FROM (
  SELECT "id", lower(btrim("name")) AS "key",
    row_number() OVER (PARTITION BY lower(btrim("name")) ORDER BY "created_at", "id") AS "n"
  FROM "projects"
) k
WHERE p."id" = k."id" AND k."n" = 1;--> statement-breakpoint
CREATE UNIQUE INDEX "projects_name_key_idx" ON "projects" USING btree ("name_key");
