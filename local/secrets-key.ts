import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { isSecretsKey } from "../src/lib/secret-box";

/** What npm start seals stored credentials with, and a line for the operator when the key differs from the last start's. */
export interface LocalSecretsKeys {
  SECRETS_KEY: string;
  /** Set only when npm start supplies it: the folder's own key, which sealed what it stores, under the operator's new one. */
  SECRETS_KEY_PREVIOUS?: string;
  notice?: string;
}

/**
 * npm start's SECRETS_KEY: the operator's, else a dev key kept in the data folder (`secrets-key`). Stored credentials
 * are sealed with it, so a key that changes between two starts on one folder leaves them unopenable: every bot's
 * webhook a 500, every run on a runner service with a secret failed. Setting SECRETS_KEY on a folder that ran on its
 * dev key is the usual way to get there, so the dev key then opens what it sealed, as SECRETS_KEY_PREVIOUS does in a
 * rotation (unless the operator set that), until a reseal moves everything under the new key. The other way round (the
 * operator's key left unset on a folder that has only ever used it) cannot be mended here, as the key is not on disk:
 * it is said, once, at the start that makes the new dev key.
 */
export function localSecretsKeys(dataDir: string, env: NodeJS.ProcessEnv): LocalSecretsKeys {
  const file = join(dataDir, "secrets-key");
  const own = env.SECRETS_KEY?.trim();
  const kept = existsSync(file) ? readFileSync(file, "utf8").trim() : undefined;
  if (!own) {
    if (kept) return { SECRETS_KEY: kept };
    // A database made before the key file: its earlier starts had SECRETS_KEY set (the file is made before the database), or
    // came before npm start sealed anything (credentials stored as given, which open whatever the key).
    const earlierKey = existsSync(join(dataDir, "host.db"));
    writeFileSync(file, randomBytes(32).toString("base64"), { mode: 0o600 });
    return {
      SECRETS_KEY: readFileSync(file, "utf8").trim(),
      notice: earlierKey
        ? `npm start: SECRETS_KEY is unset and ${file} held no key, so a new key was made there: credentials this folder stored sealed under a SECRETS_KEY of yours do not open with it (set SECRETS_KEY again, or register them again)`
        : undefined,
    };
  }
  // A file that holds no key (edited by hand) sealed nothing, as a start on it alone is refused: not offered, lest the
  // start be refused for a SECRETS_KEY_PREVIOUS the operator never set.
  if (!kept || !isSecretsKey(kept) || kept === own || env.SECRETS_KEY_PREVIOUS?.trim()) return { SECRETS_KEY: own };
  return {
    SECRETS_KEY: own,
    SECRETS_KEY_PREVIOUS: kept,
    notice: `npm start: SECRETS_KEY is not the key in ${file}, which sealed the credentials this folder stored before: that key opens them too, as SECRETS_KEY_PREVIOUS; call POST /v1/admin/secrets/reseal to seal them under SECRETS_KEY, then delete the file`,
  };
}
