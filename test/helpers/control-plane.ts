/** The bench's control plane on the dev stack's broker (see bench/control-plane.ts). */
import { ControlPlane as BenchControlPlane } from '../../bench/control-plane';
import { TRANSPORT_URL } from './stack';

export type { Event } from '../../bench/control-plane';

export class ControlPlane extends BenchControlPlane {
  constructor(exchange: string) {
    super(exchange, TRANSPORT_URL);
  }
}
