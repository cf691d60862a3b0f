import type pg from "pg";

/** node-postgres's connection with its COPY messages (pg/lib/connection.js; @types/pg omits them). */
type CopyConnection = pg.Connection & {
  sendCopyFromChunk(chunk: Buffer): void;
  endCopyFrom(): void;
};

/** Bytes per CopyData message: a 20 MB chunk goes as a few dozen messages, not one. */
const PIECE = 1 << 20;

/**
 * `COPY ... FROM STDIN` with the whole input in hand, through node-postgres's own extension point:
 * `client.query()` takes any object with a `submit(connection)` method and hands it the protocol
 * messages (how pg-copy-streams and pg-cursor are built). The bench's rows are already one buffer
 * (the same binary COPY file PGlite is given), so a stream, and a dependency for it, buy nothing.
 * `statement` is the COPY statement, e.g. `COPY facts (...) FROM STDIN WITH (FORMAT binary)`.
 */
export function copyFrom(client: pg.ClientBase, statement: string, bytes: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    const submittable = {
      submit(connection: pg.Connection) {
        connection.query(statement);
      },
      handleCopyInResponse(connection: CopyConnection) {
        const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
        for (let at = 0; at < buffer.length; at += PIECE) connection.sendCopyFromChunk(buffer.subarray(at, at + PIECE));
        connection.endCopyFrom();
      },
      // The server's refusal (ReadyForQuery follows it, and the client waits for that before its
      // next query) or the connection's loss (nothing follows): either way the COPY has failed.
      handleError(err: unknown) {
        reject(err);
      },
      // CommandComplete, then ReadyForQuery: the rows are in.
      handleReadyForQuery() {
        resolve();
      },
      handleCommandComplete() {},
      handleCopyData() {},
      handleRowDescription() {},
      handleDataRow() {},
      handleEmptyQuery() {},
      handlePortalSuspended() {},
    };
    client.query(submittable);
  });
}
