/**
 * Whether the job API says it is ready (`GET /v1/ready`, no token): the dashboard's job routes
 * all depend on it, so the dashboard is not ready while it is down or restarting.
 */
export async function probeJobApiReady(baseUrl: string, fetchImpl: typeof fetch = fetch): Promise<void> {
  const response = await fetchImpl(`${baseUrl}/v1/ready`);
  await response.body?.cancel();
  if (!response.ok) throw new Error(`job API answered ${response.status} to /v1/ready`);
}
