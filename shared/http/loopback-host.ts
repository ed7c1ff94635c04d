/**
 * DNS-rebinding defence for services that listen on loopback only: a page on a hostile site can
 * make its own host name resolve to 127.0.0.1 and then talk to a loopback port from the browser,
 * but its requests still carry the hostile name in `Host`. A loopback service answers only
 * requests whose Host names loopback.
 */

/** Host names (without port) that name this machine's loopback interface. */
export const LOOPBACK_HOST_NAMES: ReadonlySet<string> = new Set(["127.0.0.1", "localhost", "::1", "[::1]"]);

/** Whether a listener bound to `bindHost` is reachable only from this machine (so Host is checked). */
export function isLoopbackBind(bindHost: string): boolean {
  return LOOPBACK_HOST_NAMES.has(bindHost) || /^127(\.\d{1,3}){3}$/.test(bindHost);
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
  const name = hostnameOf(hostHeader);
  return LOOPBACK_HOST_NAMES.has(name) || /^127(\.\d{1,3}){3}$/.test(name);
}
