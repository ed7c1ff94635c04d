import type {
  MicrosoftResourceHealth,
  MicrosoftResourceHealthOptionalParams,
  AvailabilityStatus,
} from "@azure/arm-resourcehealth";
import type { TokenCredential } from "@azure/identity";
import { redactLogCell } from "../tools/provider-tools.js";
import { ToolError } from "../tools/tool.js";
import type { ResourceHealthEntry, ResourceHealthProvider, ResourceHealthStatus } from "./providers.js";

/** At most this many current statuses are read per scope; more makes the answer `truncated`. */
const MAX_STATUSES = 2000;
/** At most this many history entries are read for one resource (Azure keeps about 30 days). */
const MAX_HISTORY = 1000;
/** Free text from Azure is cut to this many characters. */
const TEXT_MAX = 300;

/** What the provider passes on of a resource id: never the id itself (it carries the subscription id). */
const RESOURCE_ID =
  /^\/subscriptions\/[0-9a-f-]{36}\/resourceGroups\/([^/?#]+)\/providers\/([A-Za-z0-9.]+)\/((?:[A-Za-z0-9]+\/[^/?#]+\/)*[A-Za-z0-9]+)\/([^/?#]+)$/i;
const STATUS_SUFFIX = /\/providers\/Microsoft\.ResourceHealth\/availabilityStatuses\/[^/]+$/i;

/** The resource an availability status belongs to, from the status's id (`{resource id}/providers/Microsoft.ResourceHealth/availabilityStatuses/current`). */
export function resourceOfStatusId(
  statusId: string | undefined,
): { id: string; name: string; type: string; resource_group: string } | undefined {
  const id = (statusId ?? "").replace(STATUS_SUFFIX, "");
  const match = RESOURCE_ID.exec(id);
  if (!match || id.includes("..") || id === statusId) return undefined;
  const [, group = "", namespace = "", typePath = "", name = ""] = match;
  const type = `${namespace}/${typePath
    .split("/")
    .filter((_, i) => i % 2 === 0)
    .join("/")}`.toLowerCase();
  return { id, name: decodeURIComponent(name), type, resource_group: decodeURIComponent(group) };
}

/** Azure's free text, cut and stripped of resource ids, GUIDs, URLs and addresses (they can carry the subscription id). */
const cut = (text: string | undefined) => String(redactLogCell((text ?? "").slice(0, TEXT_MAX)));
const iso = (d: Date | undefined) => (d instanceof Date && !Number.isNaN(d.getTime()) ? d.toISOString() : undefined);

/**
 * Who caused an entry, from Resource Health's own fields: `healthEventCause` (PlatformInitiated /
 * UserInitiated), `context` ("Platform Initiated" / "Customer Initiated") and `reasonType`
 * (Planned / Unplanned are the platform's, UserInitiated the customer's). None of them: unknown.
 */
export function classifyCause(p: {
  healthEventCause?: string;
  context?: string;
  reasonType?: string;
}): "platform" | "customer" | "unknown" {
  const said = [p.healthEventCause, p.context, p.reasonType].map((s) => (s ?? "").toLowerCase().replace(/[\s_-]/g, ""));
  if (said.some((s) => s.startsWith("user") || s.startsWith("customer"))) return "customer";
  if (said.some((s) => s.startsWith("platform") || s === "planned" || s === "unplanned")) return "platform";
  return "unknown";
}

function entryOf(status: AvailabilityStatus): ResourceHealthEntry | undefined {
  const p = status.properties ?? {};
  const at = iso(p.occuredTime) ?? iso(p.reportedTime);
  if (!at) return undefined;
  // Resource Health's history holds both kinds: a null availabilityState is an impacting event (an annotation).
  const kind = p.availabilityState ? "availability_state" : "annotation";
  const cause = classifyCause(p);
  return {
    at,
    kind,
    ...(p.availabilityState ? { state: p.availabilityState } : {}),
    title: cut(p.title ?? p.healthEventType),
    summary: cut(p.summary),
    reason_type: cut(p.reasonType),
    category: cut(p.healthEventCategory ?? p.category),
    // A transition with no initiator at all is status-only; anything attributed is the initiator's.
    initiator: cause === "unknown" ? "status_only" : cause === "customer" ? "customer_initiated" : "platform_initiated",
  };
}

/**
 * Resource Health over the server-configured subscription (and, when configured, only its resource
 * groups) with `@azure/arm-resourcehealth`, loaded on first use. Current statuses come from the
 * scope's `availabilityStatuses` list; one resource's history from the per-resource list, which
 * Azure documents as "all historical availability transitions and impacting events". The resource
 * is named by the caller but resolved only among the scope's own resources, so no caller text ever
 * becomes part of a request path.
 */
export function createAzureResourceHealthProvider(options: {
  subscriptionId: string;
  resourceGroups?: readonly string[];
  credential: TokenCredential;
  clientOptions?: MicrosoftResourceHealthOptionalParams;
  now?: () => Date;
}): ResourceHealthProvider {
  let client: Promise<MicrosoftResourceHealth> | undefined;
  const now = options.now ?? (() => new Date());
  const open = () => {
    client ??= import("@azure/arm-resourcehealth").then(
      ({ MicrosoftResourceHealth }) =>
        new MicrosoftResourceHealth(options.credential, options.subscriptionId, options.clientOptions),
    );
    return client;
  };

  async function scopeStatuses(): Promise<{ statuses: AvailabilityStatus[]; truncated: boolean }> {
    const health = await open();
    const lists = options.resourceGroups?.length
      ? options.resourceGroups.map((g) => health.availabilityStatuses.listByResourceGroup(g))
      : [health.availabilityStatuses.listBySubscriptionId()];
    const statuses: AvailabilityStatus[] = [];
    for (const list of lists) {
      for await (const status of list) {
        if (statuses.length >= MAX_STATUSES) return { statuses, truncated: true };
        statuses.push(status);
      }
    }
    return { statuses, truncated: false };
  }

  return {
    async current() {
      const { statuses, truncated } = await scopeStatuses();
      const observed_at = now().toISOString();
      const current: ResourceHealthStatus[] = [];
      let unreadable = 0;
      for (const status of statuses) {
        const resource = resourceOfStatusId(status.id);
        if (!resource) {
          unreadable += 1;
          continue;
        }
        const p = status.properties ?? {};
        current.push({
          name: resource.name,
          type: resource.type,
          resource_group: resource.resource_group,
          state: p.availabilityState ?? "Unknown",
          summary: cut(p.summary),
          reason_type: cut(p.reasonType),
          cause: classifyCause(p),
          ...(iso(p.occuredTime) ? { since: iso(p.occuredTime) } : {}),
        });
      }
      return { statuses: current, truncated, observed_at, unreadable };
    },

    async history(resourceName, window) {
      const { statuses } = await scopeStatuses().catch(() => {
        throw new ToolError("unavailable", "Resource Health did not answer for the configured scope");
      });
      // `<resource group>/<name>` picks one of several resources of the same name.
      const parts = resourceName.split("/");
      if (parts.length > 2)
        throw new ToolError("not_found", `no resource named ${resourceName} reports health in the configured scope`);
      const [group, name] = parts.length === 2 ? parts : [undefined, resourceName];
      const matches = statuses
        .map((s) => resourceOfStatusId(s.id))
        .filter(
          (r) =>
            r !== undefined &&
            r.name.toLowerCase() === (name ?? "").toLowerCase() &&
            (group === undefined || r.resource_group.toLowerCase() === group.toLowerCase()),
        );
      const ids = [...new Set(matches.map((r) => r?.id))];
      if (ids.length === 0)
        throw new ToolError("not_found", `no resource named ${resourceName} reports health in the configured scope`);
      if (ids.length > 1)
        throw new ToolError(
          "invalid_arguments",
          `${ids.length} resources in the configured scope are named ${resourceName}; name one as <resource group>/<name>`,
          { candidates: matches.map((r) => ({ name: r?.name, type: r?.type, resource_group: r?.resource_group })) },
        );
      const resource = matches[0] as NonNullable<(typeof matches)[number]>;
      const health = await open();
      const entries: ResourceHealthEntry[] = [];
      let read = 0;
      let truncated = false;
      // The operation's path is `/{resourceUri}/providers/…` with the URI unencoded: without its
      // leading slash the request path is the resource id exactly, not `//subscriptions/…`.
      try {
        for await (const status of health.availabilityStatuses.list(resource.id.slice(1))) {
          if (++read > MAX_HISTORY) {
            truncated = true;
            break;
          }
          const entry = entryOf(status);
          if (!entry) continue;
          const at = Date.parse(entry.at);
          if (at >= window.start.getTime() && at <= window.end.getTime()) entries.push(entry);
        }
      } catch (error) {
        // Resource Health answers 404 for a resource it keeps no history of: that is no history.
        if ((error as { statusCode?: number }).statusCode !== 404)
          throw new ToolError("unavailable", "Resource Health did not answer for this resource's history");
      }
      return {
        resource: { name: resource.name, type: resource.type, resource_group: resource.resource_group },
        entries,
        truncated,
        observed_at: now().toISOString(),
      };
    },
  };
}
