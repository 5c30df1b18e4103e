/** Polling and port helpers shared by the integration tests. */
import { createServer } from 'node:net';

/** Polls `ok` every 200 ms until it resolves true (a rejection counts as false); throws after `ms`. */
export async function waitUntil(what: string, ok: () => Promise<boolean>, ms = 180000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await ok().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Whether `port` on 127.0.0.1 can be listened on. */
export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}
