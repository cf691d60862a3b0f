import type { Clock } from "./clock";
import type { Config } from "./config";
import type { Database, Db } from "./db/types";
import type { Logger } from "./log";

/** Everything a domain function may touch, injected by the host. */
export interface Deps {
  db: Db;
  database: Database;
  config: Config;
  clock: Clock;
  log: Logger;
}
