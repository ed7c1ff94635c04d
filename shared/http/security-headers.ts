/**
 * `X-Content-Type-Options: nosniff` on every API response: a browser never runs a JSON body (which
 * may echo user text, such as FASTA deflines or job names) as script or HTML by sniffing its type.
 */
export const NOSNIFF_HEADERS: Readonly<Record<string, string>> = Object.freeze({ "X-Content-Type-Options": "nosniff" });
