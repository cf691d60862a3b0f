import { benchRecall } from "/work/main/bench/recall";

const n = Number(process.argv[2] ?? 1000);
const ef = process.argv[3] ? Number(process.argv[3]) : undefined;
console.log(JSON.stringify(await benchRecall(n, { calls: 200, efSearch: ef }), null, 1));
