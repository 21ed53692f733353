import { artifactActions } from "./artifacts";
import type { ActionTable } from "./context";
import { eventActions } from "./events";
import { historyActions } from "./history";
import { hostActions } from "./host";
import { knowledgeActions } from "./knowledge";
import { modelActions } from "./models";
import { stateActions } from "./state";
import { searchActions } from "./search";
import { steeringActions } from "./steering";
import { storageActions } from "./storage";
import { toolActions } from "./tools";

export type { ActionContext, LedgerPort, SteeringPort } from "./context";

/** The actions this host implements, one module per API group; the others answer not_found. */
export const ACTIONS: ActionTable = {
  ...historyActions,
  ...searchActions,
  ...eventActions,
  ...stateActions,
  ...artifactActions,
  ...steeringActions,
  ...storageActions,
  ...hostActions,
  ...modelActions,
  ...toolActions,
  ...knowledgeActions,
};
