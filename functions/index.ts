/**
 * The Functions app's entry (package.json `main` points at its bundle). Registrations happen on
 * import; Azure's worker and the local host both load this file. Static imports (evaluated in this
 * order) let the bundler drop what no route uses; see the README's cold-start decision.
 */
import "./composition/http-stream-setup.js";
import "./health.js";
import "./me.js";
import "./diagnostics.js";
import "./orchestrations/noop.js";
import "./orchestrations/submit-blast-job.js";
import "./blast-jobs.js";
import "./operations.js";
import "./orchestrations/database-ops.js";
import "./databases.js";
import "./orchestrations/deploy-job-api.js";
import "./cluster.js";
import "./workspace.js";
import "./orchestrations/cluster-ops.js";
import "./orchestrations/build-images.js";
import "./aks.js";
import "./api-token.js";
import "./terminal.js";
import "./console.js";
import "./channels.js";
import "./orchestrations/channel-turn.js";
import "./notifications.js";
import "./orchestrations/approval-request.js";
import "./orchestrations/read-investigation.js";
import "./ops-loop.js";
import "./api-docs.js";
