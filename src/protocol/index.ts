/** Agent Runner Protocol over HTTP v1: every wire shape, one source of truth (PROTOCOL.md). */
export * from "./common";
export * from "./manifest";
export * from "./resources";
export * from "./context";
export * from "./results";
export * from "./host-api";
export * from "./host-api-results";
export * from "./errors";
export * from "./envelope";
