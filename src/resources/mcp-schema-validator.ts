import { formatSchemaIssues, validateJsonSchema, type JsonSchema } from "./json-schema";

/**
 * The MCP SDK client's validator hook (`jsonSchemaValidator`): the SDK's
 * default is Ajv, which compiles schemas with `new Function` and fails in
 * workerd as soon as a server's tool declares an outputSchema.
 */
export const mcpSchemaValidator = {
  getValidator<T>(schema: unknown) {
    return (input: unknown) => {
      const issues = validateJsonSchema(schema as JsonSchema, input);
      return issues.length
        ? { valid: false as const, data: undefined, errorMessage: formatSchemaIssues(issues) }
        : { valid: true as const, data: input as T, errorMessage: undefined };
    };
  },
};
