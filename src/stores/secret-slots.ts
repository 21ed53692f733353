import type { SecretSlot } from "../lib/secret-box";

/**
 * The slot of each table's sealed credential, built from the row as stored:
 * the same columns when it is sealed (admin writes), opened (where it is
 * sent) and resealed, so changing where a row sends its credential in the
 * database, without the admin API resealing it, leaves the credential
 * unopenable. A record's values (bot credentials, headers) add their name.
 */
type Slot = Omit<SecretSlot, "name">;

export const runnerServiceSlot = (row: { serviceId: string; baseUrl: string }): Slot => ({ table: "runner_services", id: row.serviceId, destination: row.baseUrl });

/** A bot's credentials go to its platform's API: its own origin when set, else the platform's (named by the platform). */
export const botSlot = (row: { botId: string; platform: string; apiBaseUrl: string | null }): Slot => ({
  table: "bots",
  id: row.botId,
  destination: `${row.platform} ${row.apiBaseUrl ?? ""}`,
});

export const modelSlot = (row: { modelId: string; baseUrl: string }): Slot => ({ table: "models", id: row.modelId, destination: row.baseUrl });

export const knowledgeBaseSlot = (row: { kbId: string; endpoint: string }): Slot => ({ table: "knowledge_bases", id: row.kbId, destination: row.endpoint });

/** An MCP tool's row holds no headers (its server's are used): its destination is empty. */
export const toolSlot = (row: { toolName: string; endpoint: string | null }): Slot => ({ table: "tools", id: row.toolName, destination: row.endpoint ?? "" });

/** An agent's secret runner_config fields go to its runner: sealed for that runner at its service's address. */
export const agentConfigSlot = (row: { agentId: string; runnerId: string }, serviceBaseUrl: string): Slot => ({ table: "agents", id: row.agentId, destination: `${row.runnerId} ${serviceBaseUrl}` });

export const mcpServerSlot = (row: { name: string; url: string }): Slot => ({ table: "mcp_servers", id: row.name, destination: row.url });
