import { and, eq, inArray, sql, type SQL } from "drizzle-orm";
import { readCapped } from "../artifacts/read-capped";
import { agent } from "../db/schema";
import type { BatchItem, Db } from "../db/client";
import { DbError } from "../db/executor";
import { conflict, HostError, notFound } from "../lib/errors";
import { newId } from "../lib/ids";
import { formatRunnerId, MAX_RUNNERS_PER_MANIFEST, parseRunnerServiceManifest, type AgentRunnerManifest, type SkippedRunner } from "../protocol/manifest";
import { missingConfigFields } from "../agents/runner-config";
import { iso, parseJson } from "../lib/json";
import { agentsStore } from "../stores/agents";
import { registryStore, runnerServiceAt, toServiceView, type RunnerServiceRow } from "../stores/registry";
import { nextUpdatedAt, updatedAtOf } from "../lib/updated-at";
import { maskUrl, redact, urlSecrets } from "../resources/secrets";
import { isSealed, moveSealed, moveSealedValues } from "../lib/secret-box";
import { agentConfigSlot, runnerServiceSlot } from "../stores/secret-slots";
import { joinUrl } from "../lib/url";
import { headOf } from "../lib/text";
import { opaqueFetchFailure } from "../lib/opaque-fetch-failure";
import { manifestQuote, type ManifestQuote } from "./manifest-quote";

const MANIFEST_TIMEOUT_MS = 10_000;
const MANIFEST_MAX_BYTES = 1024 * 1024;
/** Characters of the skipped runners' problems a refusal's message quotes (details.skipped has them all). */
const WHY_SHOWN_CHARS = 1000;

async function fetchManifest(baseUrl: string): Promise<unknown> {
  const url = joinUrl(baseUrl, "/manifest");
  // What the messages below name: the URL with any credentials in it masked.
  const shown = maskUrl(url);
  // The runtime's own reason may name URLs (every one a redirect loop visited, a Location it cannot follow): masked too.
  const why = (cause: unknown) => redact(String((cause as Error)?.message ?? cause).replace(/[a-z][a-z0-9+.-]*:\/\/[^\s,]+/gi, (u) => maskUrl(u)), urlSecrets(url));
  let res: Response;
  try {
    // Not followed, as run requests are not (runner/client.ts): the host calls only the address the operator registered,
    // never one a service's answer names (another host, an internal one), and a service registered there would fail every run.
    res = await fetch(url, { headers: { accept: "application/json" }, signal: AbortSignal.timeout(MANIFEST_TIMEOUT_MS), redirect: "manual" });
  } catch (cause) {
    // workerd's opaque error gets its known causes named, not only its reference.
    throw new HostError(502, "bad_gateway", `could not fetch ${shown}: ${opaqueFetchFailure(cause) ?? why(cause)}`, undefined, { cause });
  }
  if (!res.ok) {
    await res.body?.cancel().catch(() => {});
    const redirected = res.status >= 300 && res.status < 400 ? " (a redirect, which the host does not follow: register the address the service answers at)" : "";
    throw new HostError(502, "bad_gateway", `${shown} answered HTTP ${res.status}${redirected}`);
  }
  // Read no further than the cap: a manifest that never ends is not buffered whole.
  let bytes: Uint8Array | "too_large";
  try {
    bytes = await readCapped(res, MANIFEST_MAX_BYTES);
  } catch (cause) {
    // A body that stalls past the timeout, or breaks off: as unreadable as one never sent.
    throw new HostError(502, "bad_gateway", `could not read ${shown}: ${opaqueFetchFailure(cause) ?? why(cause)}`, undefined, { cause });
  }
  if (bytes === "too_large") throw new HostError(502, "bad_gateway", `${shown} is larger than ${MANIFEST_MAX_BYTES} bytes`);
  const text = new TextDecoder().decode(bytes);
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw new HostError(502, "bad_gateway", `${shown} is not JSON`, undefined, { cause });
  }
}

const skippedView = (skipped: SkippedRunner[], quote: ManifestQuote) => skipped.map((s) => ({ index: s.index, name: s.name === undefined ? undefined : quote(s.name), reason: quote(s.issues) }));

/** `quoting`: how the service's words are quoted back (manifest-quote.ts), asked only when there are some to quote. */
async function readManifest(baseUrl: string, quoting: () => Promise<ManifestQuote>) {
  const raw = await fetchManifest(baseUrl);
  const parsed = parseRunnerServiceManifest(raw);
  const shown = maskUrl(joinUrl(baseUrl, "/manifest"));
  // The request was sound and the service answered, but not with a manifest: the upstream's fault, as an unreadable one is.
  // So is one listing more runners than the host registers (as one larger than it reads): refused whole, nothing written.
  if (!parsed.ok && parsed.runnerCount !== undefined) {
    const details = { runner_count: parsed.runnerCount, max_runners: MAX_RUNNERS_PER_MANIFEST };
    throw new HostError(502, "bad_gateway", `${shown} lists ${parsed.runnerCount} runners, more than the ${MAX_RUNNERS_PER_MANIFEST} a manifest may list: nothing was registered`, details);
  }
  if (!parsed.ok) throw new HostError(502, "bad_gateway", `${shown} is not an agent-runner/v1 manifest: ${(await quoting())(parsed.issues)}`);
  // Nothing to run (a wrong address, a deploy gone wrong): as unusable as no manifest, so a service is never registered
  // empty, nor a refresh allowed to empty one.
  if (!parsed.runners.length) {
    const quote = parsed.skipped.length ? await quoting() : (text: string) => text;
    // Scrubbed whole, then cut: a secret the cut runs through is already [redacted].
    const why = quote(parsed.skipped.map((s) => `${s.name ?? `#${s.index}`}: ${s.issues}`).join("; "));
    const shownWhy = why.length > WHY_SHOWN_CHARS ? `${headOf(why, WHY_SHOWN_CHARS)}…` : why;
    const message = `${shown} lists no runner the host can register${why ? ` (invalid: ${shownWhy})` : ""}`;
    throw new HostError(502, "bad_gateway", message, parsed.skipped.length ? { skipped: skippedView(parsed.skipped, quote) } : undefined);
  }
  return { raw, parsed };
}

/** The agents on a service's runners, as a refresh or move checks and reseals them. */
type AgentsOnService = Awaited<ReturnType<ReturnType<typeof agentsStore>["configsOnService"]>>;

/**
 * A service's new manifest may not break an agent bound to it: drop the runner
 * it runs on (its events would silently go unbound), or require a config field
 * its runner_config lacks (every run of it would be called with a config its
 * runner refuses). `bound`: the agents on the service's runners.
 */
function refuseBreakingAgents(bound: AgentsOnService, runners: { runnerId: string; manifest: AgentRunnerManifest }[]): void {
  const kept = new Map(runners.map((r) => [r.runnerId, r.manifest]));
  const orphaned = bound.filter((a) => !kept.has(a.runnerId));
  if (orphaned.length) {
    const runnerIds = [...new Set(orphaned.map((a) => a.runnerId))];
    throw conflict(
      `the manifest no longer lists runner ${runnerIds.join(", ")}, which agents ${orphaned.map((a) => a.agentId).join(", ")} run on: move or delete those agents first, or keep the runner in the manifest`,
      { agents: orphaned.map((a) => a.agentId), runner_ids: runnerIds },
    );
  }
  const lacking = bound
    .map((a) => ({ agent_id: a.agentId, runner_id: a.runnerId, missing: missingConfigFields(kept.get(a.runnerId)?.config_schema, parseJson<Record<string, unknown>>(a.runnerConfigJson, {})) }))
    .filter((a) => a.missing.length);
  if (lacking.length) {
    throw conflict(
      `the manifest requires runner_config fields that agents lack (${lacking.map((a) => `${a.agent_id}: ${a.missing.join(", ")}`).join("; ")}): give those agents the fields first, or keep them optional in the manifest`,
      { agents: lacking },
    );
  }
}

/**
 * A service moved to a new address: the sealed runner_config values of the agents on its runners, sealed again for
 * it, as statements of the same batch (each applies only if the agent's config is still what was read, and once the
 * service is at its new address). `asRead`: the move itself applies only while every agent on those runners still has
 * the config read here, so an agent saved, created or resealed meanwhile (sealed for the address being left, which
 * no statement here reseals) makes the move a 409 instead of leaving that agent's secret unopenable.
 */
async function agentConfigsMoved(db: Db, existing: { serviceId: string; baseUrl: string }, agents: AgentsOnService, baseUrl: string): Promise<{ statements: BatchItem[]; asRead?: SQL }> {
  if (existing.baseUrl === baseUrl) return { statements: [] };
  const runnerIds = await registryStore(db).runnerIdsOf(existing.serviceId);
  const moved: BatchItem[] = [];
  for (const a of agents) {
    const config = parseJson<Record<string, unknown>>(a.runnerConfigJson, {});
    const sealed = Object.fromEntries(Object.entries(config).filter(([, v]) => isSealed(v)));
    if (Object.keys(sealed).length === 0) continue;
    const resealed = await moveSealedValues(db.secrets, sealed, agentConfigSlot(a, existing.baseUrl), agentConfigSlot(a, baseUrl));
    const where = and(eq(agent.agentId, a.agentId), eq(agent.runnerConfigJson, a.runnerConfigJson), runnerServiceAt(a.runnerId, baseUrl));
    moved.push(db.update(agent).set({ runnerConfigJson: JSON.stringify({ ...config, ...resealed }) }).where(where));
  }
  if (!runnerIds.length) return { statements: moved };
  const read = agents.map((a) => sql`(${a.agentId}, ${a.runnerConfigJson})`);
  const changed = read.length ? sql` AND (${agent.agentId}, ${agent.runnerConfigJson}) NOT IN (VALUES ${sql.join(read, sql`, `)})` : sql``;
  return { statements: moved, asRead: sql`NOT EXISTS (SELECT 1 FROM ${agent} WHERE ${inArray(agent.runnerId, runnerIds)}${changed})` };
}

/** `current`: the service as it is, whose updated_at the 409 names (as a stale copy's does). */
const movedMeanwhile = (current: RunnerServiceRow) =>
  conflict(`runner service ${current.serviceId} was moved or changed, or an agent on it saved or resealed, while its manifest was fetched: nothing was saved; read it again and retry`, {
    updated_at: iso(updatedAtOf(current)),
  });
const deletedMeanwhile = (serviceId: string) => notFound(`runner service ${serviceId} was deleted while its manifest was fetched: nothing was saved`);

/**
 * The secret column to write. Null removes it (runs go unsigned); a new one is sealed. Left out, it is kept: not
 * written at all (undefined) where the service stays, so a reseal that landed meanwhile is not undone with the value
 * read before it; sealed again for the new address of a move.
 */
async function secretToStore(db: Db, input: { base_url: string; secret?: string | null }, existing: { serviceId: string; baseUrl: string; secret: string | null } | undefined, serviceId: string) {
  if (input.secret === null) return null;
  if (input.secret !== undefined) return db.secrets.seal(input.secret, runnerServiceSlot({ serviceId, baseUrl: input.base_url }));
  if (!existing) return null;
  return existing.baseUrl === input.base_url ? undefined : moveSealed(db.secrets, existing.secret, runnerServiceSlot(existing), runnerServiceSlot({ serviceId, baseUrl: input.base_url }));
}

/**
 * Fetch a service's manifest and (re)register its runners. Each runner is
 * validated on its own: an invalid one is skipped and reported, the rest
 * are registered as `http:{author}/{name}/{runner}`. A `POST` or `PUT` writes the service only as it was read
 * (`readUpdatedAt`: a PUT's own read, before the fetch; else the read here), and gives it a new updated_at; a refresh
 * changes nothing the operator set, and keeps it.
 */
export async function registerRunnerService(db: Db, input: { base_url: string; secret?: string | null; serviceId?: string; refresh?: boolean; readUpdatedAt?: number | null }) {
  const store = registryStore(db);
  // A move (PUT) onto the address of another service, however spelled, would make one service two.
  const holder = input.serviceId && !input.refresh ? await store.getServiceAt(input.base_url) : undefined;
  if (holder && holder.serviceId !== input.serviceId) throw conflict(`runner service ${holder.serviceId} is registered at ${maskUrl(input.base_url)}: delete it, or move it elsewhere first`, { service_id: holder.serviceId });
  let quote: Promise<ManifestQuote> | undefined;
  const quoting = () => (quote ??= manifestQuote(db, input));
  const { raw, parsed } = await readManifest(input.base_url, quoting).catch(async (err: unknown) => {
    // A refresh that could not read the manifest: the service keeps its runners, and shows why until one succeeds.
    if (input.refresh && input.serviceId && err instanceof HostError) await store.noteRefreshFailed(input.serviceId, input.base_url, err.message);
    throw err;
  });
  const existing = input.serviceId ? await store.getService(input.serviceId) : await store.getServiceAt(input.base_url);
  // A refresh or PUT of a service deleted while its manifest was fetched: not registered again under a new id.
  if (input.serviceId && !existing) throw deletedMeanwhile(input.serviceId);
  // A refresh of a service moved (PUT) while its manifest was fetched from the old address: not moved back.
  if (input.refresh && existing && existing.baseUrl !== input.base_url) throw movedMeanwhile(existing);
  const serviceId = existing?.serviceId ?? newId("svc");
  const now = Date.now();
  const runners = parsed.runners.map((r) => ({
    runnerId: formatRunnerId(parsed.service.author, parsed.service.name, r.name),
    serviceId,
    name: r.name,
    manifestJson: JSON.stringify(r),
    updatedAt: now,
  }));
  // Read by runner, never every agent: an operator may have thousands.
  const bound = existing ? await agentsStore(db).configsOnService(existing.serviceId) : [];
  if (existing) refuseBreakingAgents(bound, runners.map((r, i) => ({ runnerId: r.runnerId, manifest: parsed.runners[i] })));
  const agentConfigs = existing ? await agentConfigsMoved(db, existing, bound, input.base_url) : { statements: [] };
  let saved: boolean;
  try {
    saved = await store.saveService(
      {
        serviceId,
        baseUrl: input.base_url,
        secret: await secretToStore(db, input, existing, serviceId),
        author: parsed.service.author,
        name: parsed.service.name,
        version: parsed.service.version,
        manifestJson: JSON.stringify(raw),
        lastError: null,
        fetchedAt: now,
        createdAt: existing?.createdAt ?? now,
        // Left out of a refresh's write: a PUT landing meanwhile keeps its own.
        updatedAt: input.refresh ? undefined : existing ? nextUpdatedAt(updatedAtOf(existing)) : now,
      },
      runners,
      existing ? { ...existing, updatedAt: input.refresh ? undefined : input.readUpdatedAt !== undefined ? input.readUpdatedAt : existing.updatedAt } : null,
      agentConfigs.statements,
      agentConfigs.asRead,
    );
  } catch (err) {
    if (err instanceof DbError && err.isConstraintViolation && !err.integrityRule) {
      const owner = await store.serviceHolding(runners.map((r) => r.runnerId), serviceId);
      const move = owner ? `; if it moved here, PUT /v1/admin/runner-services/${owner} with this base_url` : "";
      throw conflict(`runner ids of ${parsed.service.author}/${parsed.service.name} are already registered by service ${owner ?? "(another)"}${move}`, owner ? { service_id: owner } : undefined);
    }
    throw err;
  }
  if (!saved) {
    const current = await store.getService(serviceId);
    throw current ? movedMeanwhile(current) : deletedMeanwhile(serviceId);
  }
  const service = (await store.getService(serviceId))!;
  return {
    service: toServiceView(service, await store.runnerIdsOf(serviceId)),
    registered: runners.map((r) => r.runnerId),
    skipped: parsed.skipped.length ? skippedView(parsed.skipped, await quoting()) : [],
  };
}
