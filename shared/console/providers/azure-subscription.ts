import type { SubscriptionClient, SubscriptionClientOptionalParams } from "@azure/arm-resources-subscriptions";
import type { TokenCredential } from "@azure/identity";
import { ProviderUnavailableError } from "../tools/tool.js";
import type { SubscriptionProvider } from "./providers.js";

/**
 * The server-configured subscription through ARM (SDK loaded on first use): its display name and
 * state, observed now. Its health is `health` when given (`createSubscriptionHealth` over the
 * scope's sources) and `unavailable` otherwise.
 */
export function createArmSubscriptionProvider(options: {
  subscriptionId: string;
  credential: TokenCredential;
  clientOptions?: SubscriptionClientOptionalParams;
  now?: () => Date;
  health?: SubscriptionProvider["health"];
}): SubscriptionProvider {
  let client: Promise<SubscriptionClient> | undefined;
  const now = options.now ?? (() => new Date());
  return {
    async scope() {
      client ??= import("@azure/arm-resources-subscriptions").then(
        ({ SubscriptionClient }) => new SubscriptionClient(options.credential, options.clientOptions),
      );
      const subscription = await (await client).subscriptions.get(options.subscriptionId);
      return {
        subscription_id: options.subscriptionId,
        display_name: subscription.displayName ?? "",
        state: String(subscription.state ?? "Unknown"),
        observed_at: now().toISOString(),
      };
    },
    async health() {
      if (!options.health) throw new ProviderUnavailableError("the subscription health provider");
      return options.health();
    },
  };
}
