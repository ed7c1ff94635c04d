/**
 * Turns on the HTTP stream proxy before any trigger registers: streamed request and response bodies
 * (results downloads) need it. Imported first by `index.ts`, as ES modules run in import order.
 */
import { app } from "@azure/functions";

app.setup({ enableHttpStream: true });
