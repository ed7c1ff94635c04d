/** A warm-up on the cluster as the job API reports it (`/v1/databases/{name}/warmup`). */
export interface ClusterWarmup {
  database: string;
  release: string;
  state: "running" | "succeeded" | "failed";
  nodes: {
    node: string;
    state: string;
    bytes_done: number;
    bytes_total: number;
    files_done: number;
    files_total: number;
    error?: string;
  }[];
}
