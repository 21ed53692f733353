import { buildWorker } from "./build";

console.log(await buildWorker());
