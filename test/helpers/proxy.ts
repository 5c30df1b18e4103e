/** A TCP proxy on 127.0.0.1 that a test can cut and restore, to make a real server unreachable. */
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface CuttableProxy {
  readonly port: number;
  /** Refuse new connections and drop open ones. */
  cut(): Promise<void>;
  /** Accept again on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<CuttableProxy> {
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  const listen = (): Promise<void> =>
    new Promise((resolve, reject) => {
      server = createServer((client) => {
        const upstream = connect(targetPort, targetHost);
        sockets.add(client).add(upstream);
        client.pipe(upstream).pipe(client);
        const done = (): void => {
          client.destroy();
          upstream.destroy();
          sockets.delete(client);
          sockets.delete(upstream);
        };
        client.on('error', done).on('close', done);
        upstream.on('error', done).on('close', done);
      });
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        const addr = server?.address();
        if (addr && typeof addr === 'object') port = addr.port;
        resolve();
      });
    });
  const stop = (): Promise<void> =>
    new Promise((resolve) => {
      for (const s of sockets) s.destroy();
      sockets.clear();
      if (!server) return resolve();
      server.close(() => resolve());
      server = undefined;
    });
  await listen();
  return {
    get port() {
      return port;
    },
    cut: stop,
    restore: listen,
    close: stop,
  };
}
