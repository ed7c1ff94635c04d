/**
 * The caller's address as the nearest proxy saw it: the last `X-Forwarded-For` entry (Azure's
 * front end, or the local host, appends the peer it accepted the connection from; entries further
 * left are the client's own claims and can be forged), without a port. "unknown" when absent.
 */
export function clientAddress(headers: Headers): string {
  const forwarded = headers.get("x-forwarded-for") ?? "";
  const last = forwarded.split(",").at(-1)?.trim() ?? "";
  if (!last) return "unknown";
  // "[::1]:5000" or "203.0.113.7:5000" → the address alone; a bare IPv6 address stays whole.
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(last);
  if (bracketed) return bracketed[1] as string;
  const v4 = /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/.exec(last);
  return (v4?.[1] ?? last).slice(0, 64);
}
