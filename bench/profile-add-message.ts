import { benchAddMessage } from "./add-message";

/**
 * `node --cpu-prof --cpu-prof-dir=<dir> --import tsx bench/profile-add-message.ts [clients] [ops]`:
 * add message in-process at `clients` connections (default 8), one run, for a CPU profile;
 * summarise the profile with `node --import tsx bench/profile-summary.ts <file.cpuprofile>`.
 */
const clients = Number(process.argv[2] ?? 8);
const ops = Number(process.argv[3] ?? 5000);
const r = await benchAddMessage(clients, ops, 1);
console.log(JSON.stringify(r));
