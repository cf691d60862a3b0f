import { datasetName, newDatasetName } from "../inputs";

/* The tools' argument schemas, with the bounds the matching /v1 routes enforce (lib/inputs.ts). */

export const dataset = () =>
  datasetName().describe(
    "The memory space (1-256 characters), e.g. one per end user such as `user-42`. Created by its first write; use the same value for every call about the same person.",
  );

/** The dataset a new thread goes to: also not "." or "..", which no URL path can name. */
export const newDataset = () =>
  newDatasetName().describe(
    'The memory space (1-256 characters, not "." or ".."), e.g. one per end user such as `user-42`. Created by its first write; use the same value for every call about the same person.',
  );
