import { parseArgs } from "node:util";
import { createDeliveryStore } from "../shared/notify/delivery-store.js";
import { DEV_ACCOUNT, DEV_ACCOUNT_KEY } from "./azurite.js";

/** What the CLI needs of the running stack (its `stack.json`). */
export interface NotifyStack {
  functions_url: string;
  idp_url: string;
  blob_endpoint: string;
  table_endpoint: string;
}

const connectionStringOf = (stack: NotifyStack) =>
  `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};` +
  `BlobEndpoint=${stack.blob_endpoint};TableEndpoint=${stack.table_endpoint};`;

/**
 * `blastplane notifications [--limit N] [--json]`: the most recent deliveries of the running local
 * stack, one line per channel delivery: when, channel, state, category, template, receipt.
 */
export async function notificationsCommand(argv: string[], stack: NotifyStack): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { limit: { type: "string", default: "20" }, json: { type: "boolean", default: false } },
    strict: true,
  });
  const limit = Number(values.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 500)
    throw new Error("--limit must be a whole number from 1 to 500");
  const records = await createDeliveryStore(connectionStringOf(stack)).listRecent(limit);
  if (values.json) {
    process.stdout.write(`${JSON.stringify(records, null, 2)}\n`);
    return;
  }
  if (records.length === 0) {
    process.stdout.write("No notifications yet (send one: npx blastplane notify test).\n");
    return;
  }
  for (const r of records)
    process.stdout.write(
      `${r.claimed_at}  ${`${r.kind}:${r.channel}`.padEnd(22)} ${r.state.padEnd(18)} ${r.category} ${r.template_key.padEnd(18)} ${r.receipt?.vendor_message_id ?? r.receipt?.reason ?? ""}  ${r.title}\n`,
    );
}

/**
 * `blastplane notify test [--route NAME]`: sends a marked test A2 notification through the running
 * stack's router (`POST /api/notifications/test` as a local Owner) and prints each channel's state.
 */
export async function notifyTestCommand(argv: string[], stack: NotifyStack): Promise<void> {
  const [sub, ...rest] = argv;
  if (sub !== "test") throw new Error("usage: blastplane notify test [--route NAME] [--json]");
  const { values } = parseArgs({
    args: rest,
    options: { route: { type: "string", default: "operational_alert" }, json: { type: "boolean", default: false } },
    strict: true,
  });
  const tokenResponse = await fetch(`${stack.idp_url}/dev/token`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ role: "Owner", oid: "local-owner", name: "Local Owner" }),
  });
  const { access_token } = (await tokenResponse.json()) as { access_token?: string };
  if (!access_token) throw new Error("the local identity provider gave no token");
  const response = await fetch(`${stack.functions_url}/api/notifications/test`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${access_token}` },
    body: JSON.stringify({ route: values.route }),
  });
  const body = (await response.json()) as {
    detail?: unknown;
    state?: string;
    route?: string;
    channels?: { channel: string; kind: string; state: string; vendor_message_id?: string; reason?: string }[];
  };
  if (response.status !== 200) throw new Error(`the stack refused: ${JSON.stringify(body.detail ?? body)}`);
  if (values.json) {
    process.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
    return;
  }
  process.stdout.write(`test notification on ${body.route}: ${body.state}\n`);
  for (const c of body.channels ?? [])
    process.stdout.write(
      `  ${`${c.kind}:${c.channel}`.padEnd(22)} ${c.state.padEnd(18)} ${c.vendor_message_id ?? c.reason ?? ""}\n`,
    );
}
