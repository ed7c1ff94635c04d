import { createRemoteJWKSet, jwtVerify } from "jose";

/** The audiences ARM accepts: the SDKs ask for `https://management.azure.com/.default`. */
export const ARM_AUDIENCES = [
  "https://management.azure.com",
  "https://management.azure.com/",
  "https://management.core.windows.net/",
];

/**
 * Verifies bearer tokens as ARM does: signed by the identity provider (its JWKS), for ARM's
 * audience, from the expected issuer, not expired; the caller is the token's `oid`.
 */
export function jwksTokenVerifier(options: { jwksUrl: string; issuer: string }) {
  const keys = createRemoteJWKSet(new URL(options.jwksUrl));
  return async (token: string): Promise<{ objectId: string }> => {
    const { payload } = await jwtVerify(token, keys, { issuer: options.issuer, audience: ARM_AUDIENCES });
    if (typeof payload.oid !== "string") throw new Error("token has no oid");
    return { objectId: payload.oid };
  };
}
