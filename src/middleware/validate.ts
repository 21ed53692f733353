import { zValidator } from "@hono/zod-validator";
import type { ValidationTargets } from "hono";
import type { ZodType } from "zod";
import { HostError } from "../lib/errors";
import { formatZodIssues } from "../protocol/common";

/** zod validation with the host's error shape: a 400 that says which field and why. */
export function validate<T extends ZodType, Target extends keyof ValidationTargets>(target: Target, schema: T) {
  return zValidator(target, schema, (result) => {
    if (!result.success) {
      throw new HostError(400, "invalid_request", `invalid ${target}: ${formatZodIssues(result.error as never)}`);
    }
  });
}
