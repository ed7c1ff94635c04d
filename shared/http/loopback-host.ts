/**
 * DNS-rebinding defence for services that listen on loopback only: a page on a hostile site can
 * make its own host name resolve to 127.0.0.1 and then talk to a loopback port from the browser,
 * but its requests still carry the hostile name in `Host`. A loopback service answers only
 * requests whose Host names loopback.
 */

/** Host names (without port) that name this machine's loopback interface. */
export const LOOPBACK_HOST_NAMES: ReadonlySet<string> = new Set(["127.0.0.1", "localhost", "::1", "[::1]"]);

const LOOPBACK_V4 = /^127(\.\d{1,3}){3}$/;

/** Whether a host name (a bind host, `URL.hostname`, a `Host` header's name) names this machine: `localhost`, 127.0.0.0/8, ::1. */
export function isLoopbackHostname(name: string): boolean {
  return LOOPBACK_HOST_NAMES.has(name.toLowerCase()) || LOOPBACK_V4.test(name);
}

/** Whether a listener bound to `bindHost` is reachable only from this machine (so Host is checked). */
export function isLoopbackBind(bindHost: string): boolean {
  return isLoopbackHostname(bindHost);
}

/** Whether a peer address (as `clientAddress` gives it) is this machine's loopback: 127.0.0.0/8 (also IPv4-mapped, `::ffff:127.0.0.1`) or ::1. */
export function isLoopbackAddress(address: string): boolean {
  return LOOPBACK_V4.test(address.replace(/^::ffff:/i, "")) || address === "::1";
}

/** Whether a URL's host is loopback (`http://localhost:…`, `http://127.0.0.1:…`, `http://[::1]:…`). */
export function isLoopbackUrl(url: URL): boolean {
  return isLoopbackHostname(url.hostname);
}

/** The host name of a `Host` header value (`name:port`, `[v6]:port`), lower case; "" when absent or malformed. */
export function hostnameOf(hostHeader: string | undefined): string {
  if (hostHeader === undefined) return "";
  try {
    return new URL(`http://${hostHeader}`).hostname;
  } catch {
    return "";
  }
}

/** Whether a request's `Host` header names loopback (`localhost`, `127.0.0.1`, `[::1]`, any port). */
export function isLoopbackHostHeader(hostHeader: string | undefined): boolean {
  return isLoopbackHostname(hostnameOf(hostHeader));
}
