import { join } from "node:path";
import { buildWorker, ROOT } from "../../local/build";

/** Build the Worker once for the whole run; every test host loads this bundle. */
export default async function setup() {
  await buildWorker(join(ROOT, "dist/test"));
}
