import { useRef, useState } from "preact/hooks";
import { formatTime } from "../format.js";
import { ErrorNotice, PageTitle, useApp, useAsync, useCan } from "../ui.js";

/** The job API's token (`X-SVC-API-Token`): status for everyone; reveal, copy and regenerate for Owners. */
export function ApiTokenPage() {
  const { api } = useApp();
  const isOwner = useCan("Owner");
  const status = useAsync((signal) => api.apiTokenStatus(signal), []);
  const [token, setToken] = useState<string | undefined>(undefined);
  const [note, setNote] = useState<string>("");
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const dialog = useRef<HTMLDialogElement>(null);

  const run = async (act: () => Promise<void>) => {
    setError(undefined);
    setBusy(true);
    try {
      await act();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  const reveal = () =>
    run(async () => {
      setToken((await api.revealApiToken()).api_token);
      setNote("");
    });

  const regenerate = () =>
    run(async () => {
      dialog.current?.close();
      const res = await api.regenerateApiToken();
      setToken(res.api_token);
      setNote(
        res.previous_valid_until
          ? `A new token was created. The previous token keeps working until ${formatTime(res.previous_valid_until)}.`
          : "A new token was created.",
      );
      status.reload();
    });

  const copy = async () => {
    if (!token) return;
    try {
      await navigator.clipboard.writeText(token);
      setNote("Copied to the clipboard.");
    } catch {
      const field = document.getElementById("api-token-value") as HTMLInputElement | null;
      field?.select();
      setNote("Select the token and copy it (Ctrl+C or ⌘C).");
    }
  };

  const s = status.data;
  return (
    <section>
      <PageTitle subtitle="Programs call the job API with this token in the X-SVC-API-Token header. The dashboard uses it for you.">
        API token
      </PageTitle>
      <ErrorNotice error={status.error} title="Could not load the token status:" />
      {s ? (
        <dl class="details">
          <dt>Configured</dt>
          <dd>{s.configured ? "yes" : "no"}</dd>
          <dt>Current token</dt>
          <dd>{s.last_four ? <code>…{s.last_four}</code> : "—"}</dd>
          <dt>Created</dt>
          <dd>{formatTime(s.created_at)}</dd>
          <dt>Last rotated</dt>
          <dd>{formatTime(s.rotated_at)}</dd>
          <dt>Previous token valid until</dt>
          <dd>{s.previous_valid_until ? formatTime(s.previous_valid_until) : "— (no grace period running)"}</dd>
        </dl>
      ) : null}
      {isOwner ? (
        <div class="token-actions">
          {token ? (
            <div class="field">
              <label for="api-token-value">Token</label>
              <div class="row">
                <input
                  id="api-token-value"
                  class="mono"
                  type="text"
                  readOnly
                  value={token}
                  onFocus={(e) => e.currentTarget.select()}
                />
                <button type="button" onClick={() => void copy()}>
                  Copy
                </button>
                <button type="button" onClick={() => setToken(undefined)}>
                  Hide
                </button>
              </div>
            </div>
          ) : null}
          <div class="row">
            {!token ? (
              <button type="button" disabled={busy || !s?.configured} onClick={() => void reveal()}>
                Reveal token
              </button>
            ) : null}
            <button type="button" class="danger" disabled={busy} onClick={() => dialog.current?.showModal()}>
              Regenerate…
            </button>
          </div>
          <p class="live" role="status">
            {note}
          </p>
          <dialog ref={dialog} aria-labelledby="regen-title" aria-describedby="regen-desc">
            <h2 id="regen-title">Regenerate the API token?</h2>
            <div id="regen-desc">
              <p>A new token is created and shown to you once here; copy it into the programs that call the job API.</p>
              <p>
                The current token keeps working for a grace period (one hour unless the service sets{" "}
                <code>API_TOKEN_GRACE_SECONDS</code>), so running clients can switch over; after that only the new token
                works.
              </p>
              <p>Regenerate only to rotate the token, or when it may have been exposed.</p>
            </div>
            <div class="row">
              <button type="button" class="danger" onClick={() => void regenerate()}>
                Regenerate token
              </button>
              <button type="button" onClick={() => dialog.current?.close()}>
                Keep the current token
              </button>
            </div>
          </dialog>
        </div>
      ) : (
        <p class="notice" role="note">
          Only an Owner can reveal, copy or regenerate the token.
        </p>
      )}
      <ErrorNotice error={error} />
    </section>
  );
}
