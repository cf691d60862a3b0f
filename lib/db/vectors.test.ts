import { describe, expect, it } from "vitest";
import { projectSemanticPatch } from "../settings/settings";
import { BINARY_INDEX_MIN_DIMS, vectorIndexKind, vectorIndexSql } from "./vector-indexes";
import {
  EF_SEARCH_MAX,
  EF_SEARCH_MIN,
  EXTRA_SCAN_MAX,
  efSearchFor,
  extraScanFor,
  FACTS_AT_EF_MAX,
  FACTS_PER_EF,
  FACTS_PER_EXTRA_ROW,
} from "./vectors";

describe("efSearchFor: the HNSW candidate list for a dataset's size", () => {
  it("is pgvector's default for a small dataset", () => {
    expect(efSearchFor(0)).toBe(EF_SEARCH_MIN);
    expect(efSearchFor(1)).toBe(EF_SEARCH_MIN);
    expect(efSearchFor(EF_SEARCH_MIN * FACTS_PER_EF)).toBe(EF_SEARCH_MIN);
  });

  it("grows with the dataset: one more per FACTS_PER_EF facts", () => {
    expect(efSearchFor(EF_SEARCH_MIN * FACTS_PER_EF + 1)).toBe(EF_SEARCH_MIN + 1);
    expect(efSearchFor(10_000)).toBe(63);
    expect(efSearchFor(100_000)).toBe(625);
  });

  it("stops at pgvector's maximum", () => {
    expect(efSearchFor(EF_SEARCH_MAX * FACTS_PER_EF)).toBe(EF_SEARCH_MAX);
    expect(efSearchFor(1_000_000)).toBe(EF_SEARCH_MAX);
    expect(efSearchFor(Number.MAX_SAFE_INTEGER)).toBe(EF_SEARCH_MAX);
  });

  it("never decreases as the dataset grows", () => {
    let previous = 0;
    for (let facts = 0; facts <= 300_000; facts += 997) {
      expect(efSearchFor(facts)).toBeGreaterThanOrEqual(previous);
      previous = efSearchFor(facts);
    }
  });
});

describe("extraScanFor: rows read past the kept ones on a dataset the candidate list cannot cover", () => {
  it("is none while the candidate list still grows with the dataset", () => {
    expect(extraScanFor(0)).toBe(0);
    expect(extraScanFor(100_000)).toBe(0);
    expect(extraScanFor(FACTS_AT_EF_MAX)).toBe(0);
    expect(efSearchFor(FACTS_AT_EF_MAX)).toBe(EF_SEARCH_MAX);
  });

  it("is one whole list (a second search) once the list is at pgvector's maximum", () => {
    expect(efSearchFor(FACTS_AT_EF_MAX + 1)).toBe(EF_SEARCH_MAX);
    expect(extraScanFor(FACTS_AT_EF_MAX + 1)).toBe(EF_SEARCH_MAX);
    expect(extraScanFor(EF_SEARCH_MAX * FACTS_PER_EXTRA_ROW)).toBe(EF_SEARCH_MAX);
  });

  it("grows with the graph past one list (2,000 rows at a million), up to EXTRA_SCAN_MAX", () => {
    expect(extraScanFor(EF_SEARCH_MAX * FACTS_PER_EXTRA_ROW + 1)).toBe(EF_SEARCH_MAX + 1);
    expect(extraScanFor(1_000_000)).toBe(2_000);
    expect(extraScanFor(EXTRA_SCAN_MAX * FACTS_PER_EXTRA_ROW)).toBe(EXTRA_SCAN_MAX);
    expect(extraScanFor(10_000_000)).toBe(EXTRA_SCAN_MAX);
    let previous = 0;
    for (let facts = 0; facts <= 3_000_000; facts += 9_973) {
      expect(extraScanFor(facts)).toBeGreaterThanOrEqual(previous);
      previous = extraScanFor(facts);
    }
  });

  it("starts where the setting's description (dashboard, OpenAPI) says it does", () => {
    const description = projectSemanticPatch.shape.vectorSecondSearch.unwrap().description;
    expect(description).toContain(`Past ${FACTS_AT_EF_MAX.toLocaleString("en-US")} facts`);
  });
});

describe("the HNSW index for a vector size", () => {
  it("holds vectors in single precision below BINARY_INDEX_MIN_DIMS, their sign bits from there up", () => {
    expect(vectorIndexKind(64)).toBe("float32");
    expect(vectorIndexKind(768)).toBe("float32");
    expect(vectorIndexKind(BINARY_INDEX_MIN_DIMS - 1)).toBe("float32");
    expect(vectorIndexKind(BINARY_INDEX_MIN_DIMS)).toBe("binary");
    expect(vectorIndexKind(1536)).toBe("binary");
    expect(vectorIndexKind(3072)).toBe("binary");
  });

  it("is an expression index of the size's rows, named for the size", () => {
    expect(vectorIndexSql("facts", 256)).toBe(
      "CREATE INDEX IF NOT EXISTS facts_embedding_hnsw_256 ON facts USING hnsw " +
        "((embedding::vector(256)) vector_cosine_ops) WHERE vector_dims(embedding) = 256",
    );
    expect(vectorIndexSql("entities", 1536, { m: 24, efConstruction: 128 })).toBe(
      "CREATE INDEX IF NOT EXISTS entities_embedding_hnsw_1536 ON entities USING hnsw " +
        "((binary_quantize(embedding)::bit(1536)) bit_hamming_ops) WITH (m = 24, ef_construction = 128) " +
        "WHERE vector_dims(embedding) = 1536",
    );
  });
});
