/**
 * The inbound channels' settings, loaded and checked when this module loads (with the channel
 * routes, at app start), so bad bindings or a half-configured channel stop start-up (spec §7
 * item 8). Its own module so that the console's parts can read it without importing the channels'
 * composition (which imports the console's).
 */

import { loadChannelConfig } from "../../shared/channels/channel-config.js";
import { isLocalProfile } from "../../shared/notify/notify-config.js";

export const channelConfig = loadChannelConfig(process.env, { local: isLocalProfile(process.env) });
