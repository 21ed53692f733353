import type { ActionTable, Handler } from "./context";

/** Messages claimed by this run since its last pull, in claim order (PROTOCOL §10). */
const steeringPull: Handler<"steering.pull"> = async (ctx, p) => ({ items: await ctx.steering.pull(p.mode, p.limit ?? undefined) });

export const steeringActions: ActionTable = {
  "steering.pull": steeringPull,
};
