/** Small vectors keep the fake provider and the HNSW indexes cheap in tests. */
export const TEST_EMBEDDING_DIMENSIONS = 64;
