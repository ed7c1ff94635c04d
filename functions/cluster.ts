import { deployJobApiRequestSchema } from "../shared/cluster/job-api-deploy-service.js";
import { errorResponse, jsonBodyOf, ok, retryLater, validationFailed } from "../shared/http/openapi.js";
import { jsonResult } from "../shared/http/envelope.js";
import { parseJsonBody } from "../shared/http/validation.js";
import { jobApiDeployService } from "./composition/cluster-deps.js";
import { callerOf, route } from "./composition/http-route.js";

/** The job API's deployment on the cluster (Reader): its rollout, each pod's state, and a deploy running now. */
route(
  "jobApiDeployment",
  {
    methods: ["GET"],
    route: "jobapi/deployment",
    role: "Reader",
    durable: true,
    openapi: {
      summary: "The job API's deployment on the cluster: rollout, pods and the deploy running now",
      description:
        "rollout.state is complete (the current generation observed and every replica available), progressing, or missing (never deployed). Each pod reports its phase and, when it is not running and ready, the reason (ImagePullBackOff, CrashLoopBackOff, Unschedulable…).",
      responses: {
        ...ok("the deployment", "JobApiDeployment"),
        "502": errorResponse("the cluster refused the managed identity (the message names the role to assign)"),
        "503": retryLater("no cluster is configured, or the cluster is unreachable"),
      },
    },
  },
  async (_request, scope) => {
    const status = await jobApiDeployService(scope).status();
    return jsonResult(200, { ...status, meta: { request_id: scope.requestId } }, scope.requestId);
  },
);

/**
 * Deploys the job API to the cluster (Contributor): server-side apply of `infra/k8s/jobapi.yaml`
 * rendered with the workspace's values, the image pinned by digest, then the rollout, as an
 * operation. 200 on start (spec §1 item 3); a deploy already running is answered instead.
 */
route(
  "jobApiDeploy",
  {
    methods: ["POST"],
    route: "jobapi/deploy",
    role: "Contributor",
    durable: true,
    openapi: {
      summary: "Deploy the job API to the cluster (server-side apply, then the rollout), as an operation",
      description:
        "Applies the job API's manifests as field manager blastplane with the image pinned by its digest, then waits for the rollout; a rollout not ready within JOBAPI_ROLLOUT_TIMEOUT_SECONDS fails the operation with each pod's reason. The apply is checked first (server-side dry run): a field another field manager owns is a 409 naming the manager and the field, unless force is true. A deploy already running is answered instead of starting another. Audited as jobapi.deploy.",
      requestBody: jsonBodyOf(deployJobApiRequestSchema),
      responses: {
        ...ok("the operation started (or the one already running)", "OperationStarted"),
        "400": errorResponse("malformed JSON"),
        "409": errorResponse(
          "no workspace is saved, or the apply conflicts with fields another field manager owns (deploy with force to take them over)",
        ),
        ...validationFailed,
        "502": errorResponse("the cluster refused the managed identity (the message names the role to assign)"),
        "503": retryLater("no cluster is configured, a deploy setting is missing, or the cluster is unreachable"),
      },
    },
  },
  async (request, scope) => {
    const body = await parseJsonBody(request, deployJobApiRequestSchema, 4 * 1024);
    const operation = await jobApiDeployService(scope).deploy(callerOf(scope), body, { requestId: scope.requestId });
    return jsonResult(
      200,
      { operation, operation_status_url: operation.links.self, meta: { request_id: scope.requestId } },
      scope.requestId,
    );
  },
);
