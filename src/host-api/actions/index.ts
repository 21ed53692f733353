import type { ActionTable } from "./context";
import { eventActions } from "./events";
import { historyActions } from "./history";
import { hostActions } from "./host";
import { searchActions } from "./search";
import { stateActions } from "./state";
import { storageActions } from "./storage";

export type { ActionContext, SteeringPort } from "./context";

/** The actions this host implements, one module per API group; the others answer not_found. */
export const ACTIONS: ActionTable = {
  ...historyActions,
  ...searchActions,
  ...eventActions,
  ...stateActions,
  ...storageActions,
  ...hostActions,
};
