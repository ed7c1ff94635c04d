/**
 * The browser terminal's public ingress (decision 0022): the AKS application routing add-on's
 * managed NGINX serves `wss://<host>/v1/terminal` only, with a Key Vault certificate.
 */

/** A DNS name the terminal's ingress answers on (lower case, at least two labels). */
export const TERMINAL_HOST = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/;

/**
 * An unversioned Key Vault certificate URI (`https://<vault>.vault.azure.net/certificates/<name>`):
 * the add-on then follows the certificate's rotations in the vault.
 */
export const KEY_VAULT_CERTIFICATE_URI =
  /^https:\/\/[A-Za-z0-9-]{3,24}\.vault\.[a-z0-9.-]+\/certificates\/[A-Za-z0-9-]{1,127}$/;

/** The ingress class of the application routing add-on's managed NGINX. */
export const APP_ROUTING_INGRESS_CLASS = "webapprouting.kubernetes.azure.com";
