import { mkdir } from "node:fs/promises";
import path from "node:path";
import { writeFileDurably } from "../../storage/durable-file.js";
import type { ChannelAdapter } from "../router.js";

/**
 * The local stack's inbox (local profile only): each message to each recipient becomes one
 * Markdown file under `dir/<recipient>/`, so a person trying the product can open the approval
 * requests it sent. Acknowledgement: the file written.
 */
export function createLocalInboxChannel(options: { dir: string }): ChannelAdapter {
  return {
    kind: "local_inbox",
    operation: "file.write",
    async send(message, { messageId }) {
      const who = message.recipient.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 100) || "operational";
      const folder = path.join(options.dir, who);
      await mkdir(folder, { recursive: true });
      const file = path.join(folder, `${new Date().toISOString().replace(/[:.]/g, "-")}-${messageId.slice(0, 12)}.md`);
      // Atomic and durable: a reader never sees half a message, and the acknowledgement survives a crash.
      await writeFileDurably(
        file,
        [
          `# ${message.title}`,
          "",
          message.body_markdown,
          "",
          `- category: ${message.category}`,
          `- template: ${message.template_key}`,
          `- correlation id: ${message.correlation_id}`,
          ...(message.audit_id ? [`- audit id: ${message.audit_id}`] : []),
          ...(message.console_url ? [`- console: ${message.console_url}`] : []),
          "",
        ].join("\n"),
      );
      return { outcome: "acknowledged", vendor_message_id: path.relative(options.dir, file) };
    },
  };
}
