import { describe, expect, it } from "vitest";
import { describeExtraction } from "../../ui/src/lib/extraction";

/** The dashboard's reading of an episode's extraction report (ui/src/lib/extraction.ts). */
describe("describeExtraction", () => {
  const dropped = { notAboutUser: 0, quoteNotFound: 0, emptyPart: 0, duplicate: 0, lowConfidence: 0 };

  it("names each reason that dropped a fact, in the order the service checks them, and the facts ended", () => {
    expect(
      describeExtraction({
        proposed: 9,
        kept: 4,
        dropped: { ...dropped, notAboutUser: 1, quoteNotFound: 2, emptyPart: 1, duplicate: 1 },
        invalidated: 1,
      }),
    ).toEqual({
      kept: "4 of 9 kept",
      dropped: ["1 empty part", "1 not about the user", "2 quote not found", "1 duplicate"],
      ended: "ended 1 older fact",
    });
  });

  it("reads a clean extraction as one phrase", () => {
    expect(describeExtraction({ proposed: 3, kept: 3, dropped, invalidated: 0 })).toEqual({
      kept: "3 of 3 kept",
      dropped: [],
      ended: null,
    });
    expect(describeExtraction({ proposed: 0, kept: 0, dropped, invalidated: 2 }).ended).toBe("ended 2 older facts");
  });
});
