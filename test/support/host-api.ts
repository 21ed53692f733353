/** Call the Host API as a runner would. */
export async function callHostApi(baseUrl: string, runId: string, token: string, action: string, params: Record<string, unknown> = {}) {
  const res = await fetch(`${baseUrl}/v1/runs/${runId}/api`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ action, params }),
  });
  return { status: res.status, body: (await res.json()) as { ok: boolean; data?: any; error?: { code: string; message: string } } };
}

/** A deferred promise, to hold a runner mid-run until the test lets it go. */
export function deferred<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}
