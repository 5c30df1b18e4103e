/** Addresses of the dev stack the integration tests run against (scripts/stack, or overrides). */
import { FROM_ROOT } from './release';

export { OPENSTACK_RELEASE } from './release';
export const PLACEMENT_URL = process.env.PLACEMENT_URL ?? `http://127.0.0.1:${process.env.PLACEMENT_PORT ?? (FROM_ROOT ? '8788' : '8778')}`;
export const RABBIT_PORT = Number(process.env.RABBIT_PORT ?? (FROM_ROOT ? '5682' : '5672'));
export const TRANSPORT_URL = process.env.TRANSPORT_URL ?? `rabbit://guest:guest@127.0.0.1:${RABBIT_PORT}/`;
