import { DashboardJobStore } from "../shared/dashboard/dashboard-jobs.js";
import { appContext } from "./app-context.js";

let jobs: DashboardJobStore | undefined;

/** The dashboard job store, created on first use from the app's one configuration. */
export function dashboardJobs(): DashboardJobStore {
  jobs ??= DashboardJobStore.fromConnectionString(appContext.config.storageConnectionString);
  return jobs;
}
