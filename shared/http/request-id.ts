import { randomUUID } from "node:crypto";

export const REQUEST_ID_HEADER = "X-Request-Id";

/** Inbound ids are kept only when they are short and plain, so they are safe to log and echo. */
const WELL_FORMED = /^[A-Za-z0-9][A-Za-z0-9._:-]{7,127}$/;

/** The request's id: the caller's `X-Request-Id` when well-formed, otherwise a new UUID. */
export function resolveRequestId(inbound: string | null | undefined): string {
  return inbound && WELL_FORMED.test(inbound) ? inbound : randomUUID();
}
