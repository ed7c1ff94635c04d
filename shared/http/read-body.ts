import { PayloadTooLargeError } from "../errors.js";

/** What reading a body needs of a web stream (Node's and the DOM's both fit). */
export interface BodyStream {
  getReader(): { read(): Promise<{ done: boolean; value?: Uint8Array }>; releaseLock(): void };
}

/**
 * Reads a request body up to `limitBytes`, counting while it reads, whatever the framing (a
 * Content-Length or chunked): a body over the limit is refused with 413 without being held in
 * memory. The rest is left unread; the server drains or closes the connection after the answer.
 */
export async function readBodyText(body: BodyStream | null | undefined, limitBytes: number): Promise<string> {
  if (!body) return "";
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done || !value) break;
      size += value.byteLength;
      if (size > limitBytes) throw new PayloadTooLargeError(limitBytes);
      chunks.push(value);
    }
  } finally {
    reader.releaseLock();
  }
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * A request body as chunks, read as the consumer asks for them (a streamed upload: nothing is held
 * beyond the chunk in hand). Stopping early releases the reader; the server drains or closes.
 */
export async function* bodyChunks(body: BodyStream | null | undefined): AsyncGenerator<Uint8Array> {
  if (!body) return;
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done || !value) return;
      yield value;
    }
  } finally {
    reader.releaseLock();
  }
}
