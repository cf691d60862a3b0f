import { z } from "@hono/zod-openapi";
import { USAGE_GROUPINGS } from "../../lib/usage/ledger";
import { dateInput, Iso } from "./inputs";

const count = (description: string) => z.number().int().openapi({ description });

const totals = {
  calls: count("Provider calls (model, embedding and rerank calls, failed ones included)."),
  inputTokens: count("Input (prompt) tokens, as the provider reported them."),
  outputTokens: count("Output (completion) tokens, as the provider reported them (none for embeddings)."),
  totalTokens: count("Total tokens, as the provider reported them: what a budget counts."),
  unknownCalls: count(
    "Calls whose provider reported no token counts: their tokens are unknown, not zero, and in no sum.",
  ),
  failedCalls: count("Calls that got no usable answer (outcome error or aborted)."),
};

export const UsageTotalsSchema = z.object(totals).openapi("UsageTotals");

export const UsageGroupSchema = z
  .object({
    key: z.string().nullable().openapi({
      description: "The day (YYYY-MM-DD, UTC), dataset, operation or model of the group; null for calls of no dataset.",
    }),
    ...totals,
  })
  .openapi("UsageGroup");

export const BudgetStateSchema = z
  .object({
    monthlyTokenBudget: z
      .number()
      .int()
      .nullable()
      .openapi({ description: "The project's setting usage.monthlyTokenBudget; null: no budget." }),
    month: z.string().openapi({ description: "The current month (UTC), YYYY-MM." }),
    spent: count("Total tokens reported this month."),
    remaining: z.number().int().nullable().openapi({ description: "Tokens left this month; null without a budget." }),
    exhausted: z.boolean().openapi({
      description:
        "The budget is spent: extraction waits (episodes stay pending, waitingFor budget), synthesis is null, chat answers 429.",
    }),
    resetsAt: Iso.openapi({ description: "When the next month starts (UTC), and a spent budget is whole again." }),
  })
  .openapi("UsageBudget");

export const usageRangeQuery = {
  start: dateInput.optional().openapi({
    description: "Start of the range, inclusive (ISO datetime or YYYY-MM-DD); default the start of this month (UTC).",
  }),
  end: dateInput.optional().openapi({
    description:
      "End of the range, exclusive (ISO datetime or YYYY-MM-DD); default the start of next month (UTC). At most 366 days after start.",
  }),
};

export const groupByQuery = z
  .enum(USAGE_GROUPINGS)
  .default("day")
  .openapi({ description: "day (UTC, oldest first), dataset, operation or model (most tokens first)." });

export const UsageReportSchema = z
  .object({
    start: Iso.openapi({ description: "Start of the range, inclusive." }),
    end: Iso.openapi({ description: "End of the range, exclusive." }),
    groupBy: z.enum(USAGE_GROUPINGS),
    groups: z.array(UsageGroupSchema),
    total: UsageTotalsSchema.openapi({ description: "Every call of the range." }),
    budget: BudgetStateSchema,
  })
  .openapi("UsageReport");
