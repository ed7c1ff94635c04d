/**
 * The lines of a streamed text body, read as they arrive: a result is parsed without holding its
 * whole text, and reading stops (the download is cancelled) when the caller stops iterating.
 */
export async function* readLines(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let pending = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      pending += decoder.decode(value, { stream: true });
      let start = 0;
      for (let end = pending.indexOf("\n"); end !== -1; end = pending.indexOf("\n", start)) {
        yield pending.slice(start, end);
        start = end + 1;
      }
      pending = pending.slice(start);
    }
    pending += decoder.decode();
    if (pending.length > 0) yield pending;
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
