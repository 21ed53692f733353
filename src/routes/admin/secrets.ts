import { dbOf } from "../../db/connect";
import { configOf } from "../../env";
import { conflict } from "../../lib/errors";
import { resealStoredSecrets } from "../../stores/reseal";
import { noBody } from "../../middleware/validate";
import { router } from "../app-env";

/**
 * `POST /v1/admin/secrets/reseal`: every stored credential sealed under the
 * current SECRETS_KEY (those stored before a key was set, and those still
 * under SECRETS_KEY_PREVIOUS after a rotation). Answers how many it
 * rewrote and how many it could not open, per kind. Safe to repeat.
 */
export const secretsRouter = router().post("/reseal", noBody(), async (c) => {
  if (!configOf(c.env).SECRETS_KEY) throw conflict("SECRETS_KEY is not set: there is no key to seal under");
  return c.json(await resealStoredSecrets(dbOf(c.env)));
});
