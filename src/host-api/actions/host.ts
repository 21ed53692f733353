import type { ActionTable, Handler } from "./context";

const hostVersion: Handler<"host.version"> = async (ctx) => ({ version: ctx.config.HOST_VERSION });

export const hostActions: ActionTable = {
  "host.version": hostVersion,
};
