/** Addresses of the dev stack the integration tests run against (scripts/stack, or overrides). */
export const PLACEMENT_URL = process.env.PLACEMENT_URL ?? `http://127.0.0.1:${process.env.PLACEMENT_PORT ?? '8778'}`;
export const RABBIT_PORT = Number(process.env.RABBIT_PORT ?? '5672');
export const TRANSPORT_URL = process.env.TRANSPORT_URL ?? `rabbit://guest:guest@127.0.0.1:${RABBIT_PORT}/`;
