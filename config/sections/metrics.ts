/**
 * The `[metrics]` section: where the agent serves its Prometheus `/metrics` and `/healthz`.
 *
 * It is: declarations only. It is not: the HTTP server.
 */
import { z } from 'zod';
import { listenAddress, option } from '../types';

export const metricsSection = z.object({
  listen: option(listenAddress(), {
    help: 'Address of the HTTP endpoint serving /metrics (Prometheus) and /healthz; empty disables it. Keep it on loopback or a management network: it has no authentication.',
    default: '127.0.0.1:9180',
    expected: 'host:port (e.g. 127.0.0.1:9180), or empty',
  }),
});
