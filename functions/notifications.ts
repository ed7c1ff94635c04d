import { app } from "@azure/functions";
import { z } from "zod";
import { InvalidFieldError } from "../shared/errors.js";
import { jsonResult } from "../shared/http/envelope.js";
import { errorResponse, jsonBodyOf, ok, parametersOf, validationFailed } from "../shared/http/openapi.js";
import { parseJsonBody, parseQuery } from "../shared/http/validation.js";
import { LOCALES } from "../shared/notify/localize.js";
import { PREVIEW_TEMPLATES, renderPreview } from "../shared/notify/preview.js";
import { sendTestNotification } from "../shared/notify/test-notification.js";
import { appContext } from "./composition/app-context.js";
import { consoleParts, notifyConfig } from "./composition/console-deps.js";
import { callerOf, route } from "./composition/http-route.js";

const testBody = z.strictObject({
  route: z
    .string()
    .regex(/^[a-z][a-z0-9_]{0,62}$/, "must be a route name of config/notifications-matrix.yaml")
    .default("operational_alert"),
});

/**
 * Sends a marked test A2 notification through the router to every channel of a route (Owner;
 * audited) and answers each channel's delivery state and receipt.
 */
route(
  "notificationsTest",
  {
    methods: ["POST"],
    route: "notifications/test",
    role: "Owner",
    openapi: {
      summary: "Send a marked test notification through the router",
      description:
        "Sends a clearly marked test A2 message to every channel of a route of config/notifications-matrix.yaml (default operational_alert) and answers each channel's delivery state and receipt. Audited as notify.test.",
      requestBody: jsonBodyOf(testBody),
      responses: {
        ...ok("the delivery states", "NotificationTestResult"),
        "400": errorResponse("malformed JSON"),
        "413": errorResponse("request body too large"),
        ...validationFailed,
      },
    },
  },
  async (request, scope) => {
    const body = await parseJsonBody(request, testBody, 4 * 1024);
    if (!Object.hasOwn(notifyConfig.matrix.routes, body.route))
      throw new InvalidFieldError(["body", "route"], "names no route of config/notifications-matrix.yaml");
    const caller = callerOf(scope);
    const { notifier } = await consoleParts();
    const result = await sendTestNotification(
      { notifier, audit: appContext.audit },
      { route: body.route, actor: { oid: caller.oid, name: caller.name }, requestId: scope.requestId, now: new Date() },
    );
    return jsonResult(200, result, scope.requestId);
  },
);

const previewQuery = z.strictObject({
  template: z.enum(PREVIEW_TEMPLATES).describe("the message template to render"),
  locale: z.enum(LOCALES).default("en").describe("the catalog to render it from"),
});

/**
 * Renders a notification template as the email channel would send it, from synthetic placeholders
 * and in a locale's catalog: GET only, reads nothing and sends nothing (any signed-in role).
 */
route(
  "notificationsPreview",
  {
    methods: ["GET"],
    route: "notifications/preview",
    role: "Reader",
    openapi: {
      summary: "Preview a notification template as an email",
      description:
        "Renders one template (subject, text and HTML parts) from synthetic placeholders in the en or ko catalog, as the email channel would send it. Reads no incident, approval or person, and sends nothing.",
      parameters: parametersOf(previewQuery, "query"),
      responses: {
        ...ok("the rendered email", "NotificationPreview"),
        "400": errorResponse("an unknown template or locale"),
        ...validationFailed,
      },
    },
  },
  async (request, scope) => {
    const { template, locale } = parseQuery(request, previewQuery);
    return jsonResult(200, renderPreview(template, locale, notifyConfig.consoleBaseUrl), scope.requestId);
  },
);

/**
 * The notification queue's worker: messages a crashed host accepted and had not finished sending
 * go out once its lease runs out (every minute, and once at start). Channels that acknowledged are
 * not called again; one the dead host was calling is recorded ambiguous (docs/notifications.md).
 */
app.timer("notificationQueueTimer", {
  schedule: "30 * * * * *",
  runOnStartup: true,
  handler: async () => {
    const closed = await (await consoleParts()).notifier.drain();
    if (closed > 0) appContext.logger.info("notification queue drained", { closed });
  },
});

/**
 * The digests (A4): each digest route's period that has ended is sent as one briefing through the
 * router, or suppressed when nothing significant happened (docs/notifications.md). Hourly; a
 * second run, another host or a restart sends nothing twice.
 */
app.timer("notificationDigestTimer", {
  schedule: "0 5 * * * *",
  handler: async () => {
    const results = await (await consoleParts()).notifier.digests.flush();
    if (results.length > 0)
      appContext.logger.info("digests flushed", {
        sent: results.filter((r) => r.outcome === "sent").length,
        suppressed: results.filter((r) => r.outcome === "suppressed").length,
      });
  },
});
