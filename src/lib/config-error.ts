/**
 * The deployment lacks a setting or has a wrong one (a secret not put, a variable that does not parse, a database
 * token refused): no request can be served until the operator fixes it. Answered 503 `misconfigured` with the
 * problems, which name settings and rules, never their values.
 */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
  constructor(readonly problems: readonly string[]) {
    super(`the host is misconfigured: ${problems.join("; ")}`);
  }
}
