/**
 * The Functions app's entry (package.json `main` points at its bundle). Registrations happen on
 * import; Azure's worker and the local host both load this file.
 */
import { app } from "@azure/functions";

// Streamed request and response bodies (results downloads) need the HTTP stream proxy.
app.setup({ enableHttpStream: true });

await import("./health.js");
await import("./me.js");
await import("./diagnostics.js");
await import("./orchestrations/noop.js");
await import("./orchestrations/submit-blast-job.js");
await import("./blast-jobs.js");
await import("./operations.js");
await import("./orchestrations/database-ops.js");
await import("./databases.js");
await import("./workspace.js");
await import("./api-token.js");
