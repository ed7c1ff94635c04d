import { type ComponentChildren, createContext } from "preact";
import { useCallback, useContext, useEffect, useRef, useState } from "preact/hooks";
import { hasRoleAtLeast, ROLES, type Role } from "../../shared/auth/roles.js";
import { type ApiClient, ApiError, type Caller } from "./api.js";
import type { Auth } from "./auth.js";

/** What every page needs: the API client, the signed-in caller and the session. */
export interface AppState {
  api: ApiClient;
  caller: Caller;
  auth: Auth;
}

export const AppContext = createContext<AppState | undefined>(undefined);

/** The API client and session, available before sign-in too (diagnostics need no token). */
export const ApiContext = createContext<{ api: ApiClient; auth: Auth } | undefined>(undefined);

/** The API client outside the signed-in part of the app. */
export function useApi(): { api: ApiClient; auth: Auth } {
  const value = useContext(ApiContext);
  if (!value) throw new Error("useApi outside the app");
  return value;
}

/** The app state; pages render only inside a signed-in session. */
export function useApp(): AppState {
  const state = useContext(AppContext);
  if (!state) throw new Error("useApp outside a signed-in session");
  return state;
}

/** The caller's highest role, for display. */
export function topRole(caller: Caller): Role | undefined {
  return [...ROLES].reverse().find((role) => caller.roles.includes(role));
}

/** True when the caller holds `floor` or a higher role (the UI hides what the backend would refuse). */
export function useCan(floor: Role): boolean {
  return hasRoleAtLeast(useApp().caller.roles, floor);
}

/** Loads data for a page: cancelled when the page goes away or `deps` change; `reload` runs it again. */
export function useAsync<T>(load: (signal: AbortSignal) => Promise<T>, deps: readonly unknown[]) {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const [round, setRound] = useState(0);
  useEffect(() => {
    const controller = new AbortController();
    setState((s) => ({ ...s, loading: true }));
    load(controller.signal).then(
      (data) => !controller.signal.aborted && setState({ data, loading: false }),
      (error: unknown) => !controller.signal.aborted && setState((s) => ({ data: s.data, error, loading: false })),
    );
    return () => controller.abort();
  }, [...deps, round]);
  const reload = useCallback(() => setRound((r) => r + 1), []);
  return { ...state, reload, setData: (data: T) => setState({ data, loading: false }) };
}

/**
 * Calls `tick` every `intervalMs` while `intervalMs` is set and the page is visible; a tick starts
 * only after the previous one settled, so a slow answer never piles requests up.
 */
export function usePolling(tick: () => Promise<unknown>, intervalMs: number | undefined): void {
  const latest = useRef(tick);
  latest.current = tick;
  useEffect(() => {
    if (intervalMs === undefined) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stopped = false;
    const schedule = () => {
      timer = setTimeout(run, intervalMs);
    };
    const run = async () => {
      if (stopped) return;
      if (document.visibilityState === "visible") {
        try {
          await latest.current();
        } catch {
          // The page shows its own errors; polling goes on.
        }
      }
      if (!stopped) schedule();
    };
    schedule();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [intervalMs]);
}

/** A page's heading; focused on arrival so screen readers announce the new page. */
export function PageTitle(props: { children: ComponentChildren; subtitle?: ComponentChildren }) {
  const ref = useRef<HTMLHeadingElement>(null);
  useEffect(() => ref.current?.focus({ preventScroll: true }), []);
  return (
    <div class="page-title">
      <h1 ref={ref} tabIndex={-1}>
        {props.children}
      </h1>
      {props.subtitle ? <p class="subtitle">{props.subtitle}</p> : null}
    </div>
  );
}

/** An API or network failure, with the request id support needs (spec §7: log detail and request_id). */
export function ErrorNotice(props: { error: unknown; title?: string; children?: ComponentChildren }) {
  const { error } = props;
  if (error === undefined || error === null) return null;
  const api = error instanceof ApiError ? error : undefined;
  const text = api ? api.message : error instanceof Error ? error.message : String(error);
  return (
    <div class="notice notice-error" role="alert">
      <p>
        <strong>{props.title ?? describeStatus(api?.status)}</strong> {text}
      </p>
      {api?.retryAfterSeconds ? <p>Try again in {api.retryAfterSeconds} s.</p> : null}
      {props.children}
      {api?.requestId ? <p class="request-id">Request id: {api.requestId}</p> : null}
    </div>
  );
}

function describeStatus(status: number | undefined): string {
  switch (status) {
    case undefined:
      return "Something went wrong:";
    case 401:
      return "Not signed in:";
    case 403:
      return "Not allowed:";
    case 404:
      return "Not found:";
    case 409:
    case 412:
      return "Conflict:";
    case 422:
      return "Please correct:";
    case 429:
      return "Busy:";
    default:
      return status >= 500 ? "The service could not answer:" : "Request refused:";
  }
}

/** A labelled form field with its hint and error, wired for assistive technology. */
export function Field(props: {
  id: string;
  label: string;
  hint?: ComponentChildren;
  error?: string;
  children: ComponentChildren;
}) {
  return (
    <div class={`field${props.error ? " field-invalid" : ""}`}>
      <label for={props.id}>{props.label}</label>
      {props.children}
      {props.hint ? (
        <p class="hint" id={`${props.id}-hint`}>
          {props.hint}
        </p>
      ) : null}
      {props.error ? (
        <p class="field-error" id={`${props.id}-error`}>
          {props.error}
        </p>
      ) : null}
    </div>
  );
}

/** `aria-*` attributes of an input inside {@link Field}. */
export function fieldAria(id: string, error: string | undefined, hasHint = false) {
  const describedBy = [hasHint ? `${id}-hint` : "", error ? `${id}-error` : ""].filter(Boolean).join(" ");
  return { "aria-invalid": error ? true : undefined, "aria-describedby": describedBy || undefined };
}

const STATUS_TONE: Record<string, string> = {
  completed: "ok",
  succeeded: "ok",
  SUCCESS: "ok",
  warm: "ok",
  failed: "bad",
  FAILURE: "bad",
  cancelled: "muted",
  cold: "muted",
};

/** A status word as a coloured badge (the word itself carries the meaning, not the colour). */
export function StatusBadge(props: { status: string }) {
  return <span class={`badge badge-${STATUS_TONE[props.status] ?? "busy"}`}>{props.status}</span>;
}

/**
 * A table that may be wider than the screen (390 px phones): it scrolls sideways, and is focusable
 * so keyboard users can scroll it too (WCAG 2.1.1; axe's scrollable-region-focusable).
 */
export function ScrollRegion(props: { label: string; children: ComponentChildren }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must take focus to be scrolled by keyboard
    <section class="table-wrap" aria-label={props.label} tabIndex={0}>
      {props.children}
    </section>
  );
}

/** A polite live region: changes are announced without moving focus. */
export function LiveText(props: { children: ComponentChildren }) {
  return (
    <p class="live" aria-live="polite">
      {props.children}
    </p>
  );
}
