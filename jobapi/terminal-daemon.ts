import { createLogger } from "../shared/logging/logger.js";
import { loadTerminalDaemonConfig } from "./terminal/daemon-config.js";
import { startPtyDaemon } from "./terminal/pty-daemon.js";

/**
 * The terminal daemon process (decision 0020): a shell per connection on 127.0.0.1 only. On the
 * cluster it is its own container of the job-API pod (same loopback, its own service account
 * token); locally `npm start` runs it as a child. SIGTERM ends every shell.
 */
async function main(): Promise<void> {
  const config = loadTerminalDaemonConfig(process.env);
  const logger = createLogger({ level: config.logLevel, base: { service: "terminal-daemon" } });
  const daemon = await startPtyDaemon({
    port: config.port,
    shell: config.shell,
    env: { ...config.shellEnv },
    cwd: config.cwd,
    logger,
  });
  logger.info("terminal daemon ready", {
    address: `${daemon.address.address}:${daemon.address.port}`,
    url: `ws://${daemon.address.address}:${daemon.address.port}`,
  });
  const stop = () => void daemon.close().then(() => process.exit(0));
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}

main().catch((error: unknown) => {
  process.stderr.write(`terminal daemon failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
