import { useState } from "preact/hooks";
import { zodIssues } from "../../../shared/http/validation.js";
import { workspaceSchema } from "../../../shared/workspace/workspace.js";
import { ApiError, type DiscoveredChoice, type DiscoveryKind, type StoredWorkspace, type Workspace } from "../api.js";
import { formatTime } from "../format.js";
import { ErrorNotice, Field, fieldAria, PageTitle, useApp, useAsync, useCan } from "../ui.js";

type Key = keyof Workspace;

const FIELDS: readonly { key: Key; label: string; hint: string }[] = [
  { key: "subscription_id", label: "Subscription id", hint: "The Azure subscription (a GUID)." },
  { key: "resource_group", label: "Resource group", hint: "Where the workload resources live." },
  { key: "location", label: "Region", hint: "Azure region name, e.g. westeurope." },
  { key: "storage_account", label: "Storage account", hint: "3–24 lowercase letters or digits." },
  { key: "registry", label: "Container registry", hint: "5–50 letters or digits." },
  { key: "cluster_name", label: "Cluster name", hint: "The AKS cluster." },
  { key: "node_size", label: "Node size", hint: "VM size, e.g. Standard_D4s_v5." },
  { key: "node_count", label: "Node count", hint: "1–100." },
];

type Draft = Record<Key, string>;

const EMPTY: Draft = {
  subscription_id: "",
  resource_group: "",
  location: "",
  storage_account: "",
  registry: "",
  cluster_name: "",
  node_size: "",
  node_count: "",
};

function toDraft(w: Workspace): Draft {
  return { ...w, node_count: String(w.node_count) };
}

function fromDraft(d: Draft): Record<string, unknown> {
  const trimmed = Object.fromEntries(Object.entries(d).map(([k, v]) => [k, v.trim()]));
  return { ...trimmed, node_count: trimmed.node_count === "" ? undefined : Number(trimmed.node_count) };
}

/** The workspace configuration: where the control plane's Azure resources live (saved server-side). */
export function WorkspacePage() {
  const { api } = useApp();
  const canEdit = useCan("Contributor");
  const [stored, setStored] = useState<StoredWorkspace | undefined>(undefined);
  const [etag, setEtag] = useState<string | undefined>(undefined);
  const [draft, setDraft] = useState<Draft>(EMPTY);
  const [issues, setIssues] = useState<Partial<Record<Key, string>>>({});
  const [saveError, setSaveError] = useState<unknown>(undefined);
  const [conflict, setConflict] = useState(false);
  const [saved, setSaved] = useState<string | undefined>(undefined);
  const [saving, setSaving] = useState(false);

  const load = useAsync(async (signal) => {
    try {
      const res = await api.getWorkspace(signal);
      setStored(res.body);
      setEtag(res.etag ?? res.body.etag);
      setDraft(toDraft(res.body.workspace));
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) throw error;
      setStored(undefined);
      setEtag(undefined);
      setDraft(EMPTY);
    }
    setConflict(false);
    setIssues({});
    return true;
  }, []);

  const save = async (event: Event) => {
    event.preventDefault();
    setSaveError(undefined);
    setSaved(undefined);
    const body = fromDraft(draft);
    const parsed = workspaceSchema.safeParse(body);
    if (!parsed.success) {
      setIssues(byField(zodIssues(parsed.error, "body", body)));
      requestAnimationFrame(() => document.querySelector<HTMLElement>("[aria-invalid='true']")?.focus());
      return;
    }
    setIssues({});
    setSaving(true);
    try {
      const res = await api.putWorkspace(parsed.data, etag);
      setStored(res.body);
      setEtag(res.etag ?? res.body.etag);
      setSaved(`Saved ${formatTime(res.body.updated_at)}.`);
    } catch (error) {
      if (error instanceof ApiError && (error.status === 409 || error.status === 412 || error.status === 428))
        setConflict(true);
      else if (error instanceof ApiError && error.status === 422) setIssues(byField(error.issues));
      else setSaveError(error);
    } finally {
      setSaving(false);
    }
  };

  return (
    <section>
      <PageTitle subtitle="Where blastplane's Azure resources live. Saved on the server, so scheduled work knows it too.">
        Workspace
      </PageTitle>
      <ErrorNotice error={load.error} title="Could not load the workspace:" />
      {!canEdit ? (
        <p class="notice" role="note">
          Your role can view the workspace; changing it needs the Contributor role or higher.
        </p>
      ) : null}
      {load.data && !stored ? (
        <p class="notice">No workspace is saved yet{canEdit ? ": fill in the fields and save." : "."}</p>
      ) : null}
      {conflict ? (
        <div class="notice notice-error" role="alert">
          <p>
            <strong>Changed elsewhere.</strong> Someone saved the workspace after you loaded it, so your changes were
            not saved. Reload to see the current configuration, then make your changes again.
          </p>
          <p>
            <button type="button" onClick={load.reload}>
              Reload
            </button>
          </p>
        </div>
      ) : null}
      {canEdit && load.data ? (
        <Discovered
          draft={draft}
          onPick={(values) => {
            setDraft((d) => ({ ...d, ...values }));
            setSaved(undefined);
          }}
        />
      ) : null}
      <form class="form" onSubmit={save} noValidate>
        <div class="grid-2">
          {FIELDS.map((f) => (
            <Field key={f.key} id={`ws-${f.key}`} label={f.label} hint={f.hint} error={issues[f.key]}>
              <input
                id={`ws-${f.key}`}
                type="text"
                inputMode={f.key === "node_count" ? "numeric" : undefined}
                value={draft[f.key]}
                readOnly={!canEdit}
                onInput={(e) => setDraft((d) => ({ ...d, [f.key]: e.currentTarget.value }))}
                {...fieldAria(`ws-${f.key}`, issues[f.key], true)}
              />
            </Field>
          ))}
        </div>
        <ErrorNotice error={saveError} title="Not saved:" />
        {canEdit ? (
          <div class="actions">
            <button type="submit" class="primary" disabled={saving || conflict || !load.data}>
              {saving ? "Saving…" : "Save workspace"}
            </button>
            <span class="live" role="status">
              {saved ?? ""}
            </span>
          </div>
        ) : null}
        {stored ? (
          <p class="hint">
            Last saved {formatTime(stored.updated_at)} by {stored.updated_by.name || stored.updated_by.oid}.
          </p>
        ) : null}
      </form>
    </section>
  );
}

function byField(issues: readonly { loc: readonly (string | number)[]; msg: string }[]): Partial<Record<Key, string>> {
  const out: Partial<Record<Key, string>> = {};
  for (const issue of issues) {
    const key = issue.loc[1] as Key;
    out[key] = out[key] ? `${out[key]} ${issue.msg}` : issue.msg;
  }
  return out;
}

const SUBSCRIPTION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The pickers of what the managed identity sees, each filling the workspace field it names. */
const PICKERS: readonly { kind: Exclude<DiscoveryKind, "subscriptions">; key: Key; label: string }[] = [
  { kind: "resource_groups", key: "resource_group", label: "Resource groups" },
  { kind: "storage_accounts", key: "storage_account", label: "Storage accounts" },
  { kind: "registries", key: "registry", label: "Container registries" },
  { kind: "clusters", key: "cluster_name", label: "Clusters" },
];

/**
 * What the dashboard's managed identity sees in Azure (spec: no typing of names a list can offer):
 * its subscriptions, then that subscription's resource groups, storage accounts, registries and
 * clusters (in the chosen resource group). Picking one fills its field; a resource group also
 * fills the region. A list Azure refuses says which role is missing.
 */
function Discovered(props: { draft: Draft; onPick: (values: Partial<Draft>) => void }) {
  const { api } = useApp();
  const subscription = props.draft.subscription_id.trim();
  const group = props.draft.resource_group.trim();
  const known = SUBSCRIPTION_ID.test(subscription);
  const subscriptions = useAsync((signal) => api.workspaceChoices("subscriptions", {}, signal), []);
  const lists = useAsync(
    async (signal) =>
      known
        ? Promise.all(
            PICKERS.map((p) =>
              api.workspaceChoices(
                p.kind,
                {
                  subscription_id: subscription,
                  ...(p.kind !== "resource_groups" && group ? { resource_group: group } : {}),
                },
                signal,
              ),
            ),
          )
        : undefined,
    [subscription, group, known],
  );
  const picker = (
    id: string,
    label: string,
    items: readonly DiscoveredChoice[],
    current: string,
    value: (c: DiscoveredChoice) => string,
    pick: (c: DiscoveredChoice) => Partial<Draft>,
  ) => (
    <div class="field" key={id}>
      <label for={id}>{label}</label>
      <select
        id={id}
        value={items.some((c) => value(c) === current) ? current : ""}
        disabled={items.length === 0}
        onChange={(e) => {
          const chosen = items.find((c) => value(c) === e.currentTarget.value);
          if (chosen) props.onPick(pick(chosen));
        }}
      >
        <option value="">{items.length === 0 ? "None found" : "Choose…"}</option>
        {items.map((c) => (
          <option key={c.id} value={value(c)}>
            {c.detail && c.detail !== c.name ? `${c.name} (${c.detail})` : c.name}
          </option>
        ))}
      </select>
    </div>
  );
  // Shown once the identity's subscriptions are listed, or Azure refused the list (502: the message
  // names the role the identity lacks). Azure unreachable or not configured: the fields are typed.
  const refused = subscriptions.error instanceof ApiError && subscriptions.error.status === 502;
  if (!subscriptions.data && !refused) return null;
  return (
    <section class="form" aria-label="Discovered in Azure">
      <h2>Discovered in Azure</h2>
      <p class="hint">What the dashboard's managed identity can see. Choosing fills the field below.</p>
      <ErrorNotice error={subscriptions.error ?? lists.error} title="Could not list:" />
      <div class="grid-2">
        {picker(
          "choose-subscription",
          "Subscriptions",
          subscriptions.data?.items ?? [],
          subscription,
          (c) => c.id.split("/").pop() ?? c.id,
          (c) => ({ subscription_id: c.id.split("/").pop() ?? c.id }),
        )}
        {PICKERS.map((p, i) =>
          picker(
            `choose-${p.key}`,
            p.label,
            lists.data?.[i]?.items ?? [],
            props.draft[p.key],
            (c) => c.name,
            (c) => ({
              [p.key]: c.name,
              ...(p.kind === "resource_groups" && c.location ? { location: c.location } : {}),
            }),
          ),
        )}
      </div>
    </section>
  );
}
