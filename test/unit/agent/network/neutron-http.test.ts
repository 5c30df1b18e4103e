// The Neutron client over the real HTTP transport, against nock: the routes, headers and bodies it
// sends, which failures it retries (and which not), and how each status is classified.
import nock from 'nock';
import type { Clock } from '../../../../lib/clock';
import type { AuthProvider } from '../../../../tracker/placement/auth';
import { NodeHttpTransport, TransportError, type HttpTransport } from '../../../../tracker/placement/transport';
import { NeutronHttpClient, neutronRoute } from '../../../../agent/network/neutron-http';
import {
  NetworkRequestError,
  NeutronAuthError,
  NeutronConflictError,
  NeutronNotFoundError,
  NeutronRefusedError,
  NeutronResponseError,
  NeutronUnavailableError,
} from '../../../../agent/network/errors';

const BASE = 'http://neutron.test:9696';
const PORT_ID = '5f0c3a0e-1d7b-4a55-9d0e-3c1f6a2b7e01';
const NET_ID = '0b1e8a7c-2f4d-4c6e-8a9b-1c2d3e4f5a6b';

/** A token that changes after each invalidate (token-1, token-2, ...). */
class CountingAuth implements AuthProvider {
  invalidations = 0;
  token(): Promise<string> {
    return Promise.resolve(`token-${this.invalidations + 1}`);
  }
  endpoint(): Promise<string> {
    return Promise.resolve(BASE);
  }
  invalidate(): void {
    this.invalidations++;
  }
}

/** Sleeps pass at once; what was slept is recorded. */
class FakeClock implements Clock {
  readonly slept: number[] = [];
  private t = 0;
  now(): number {
    return this.t;
  }
  sleep(ms: number): Promise<void> {
    this.slept.push(ms);
    this.t += ms;
    return Promise.resolve();
  }
}

const portBody = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
  id: PORT_ID,
  network_id: NET_ID,
  mac_address: 'fa:16:3e:00:00:01',
  fixed_ips: [{ subnet_id: 'sub-1', ip_address: '10.0.0.5' }],
  device_id: '',
  device_owner: '',
  status: 'DOWN',
  admin_state_up: true,
  tenant_id: 'proj-1',
  'binding:host_id': '',
  'binding:vif_type': 'unbound',
  'binding:vif_details': {},
  'binding:vnic_type': 'normal',
  'binding:profile': {},
  ...over,
});

function client(retries = 2): { c: NeutronHttpClient; auth: CountingAuth; clock: FakeClock; routes: string[] } {
  const auth = new CountingAuth();
  const clock = new FakeClock();
  const routes: string[] = [];
  const c = new NeutronHttpClient({ auth, transport: new NodeHttpTransport({ timeoutMs: 5000 }), retries, clock, onRequest: (m, r) => routes.push(`${m} ${r}`) });
  return { c, auth, clock, routes };
}

beforeAll(() => nock.disableNetConnect());
afterEach(() => {
  nock.cleanAll();
  nock.disableNetConnect();
});
afterAll(() => {
  nock.enableNetConnect();
  nock.restore();
});

describe('NeutronHttpClient: what it sends', () => {
  test('GET a port with the token and JSON accept; the answer is parsed with defaults for unbound ports', async () => {
    const { c, routes } = client();
    const { 'binding:vif_details': _d, 'binding:profile': _p, ...bare } = portBody();
    const scope = nock(BASE, { badheaders: ['content-type'] })
      .matchHeader('x-auth-token', 'token-1')
      .matchHeader('accept', 'application/json')
      .get(`/v2.0/ports/${PORT_ID}`)
      .reply(200, { port: { ...bare, 'binding:host_id': null } });
    const port = await c.getPort(PORT_ID);
    scope.done();
    expect(port).toMatchObject({ id: PORT_ID, 'binding:host_id': '', 'binding:vif_details': {}, 'binding:profile': {} });
    expect(routes).toEqual([`GET /v2.0/ports/${PORT_ID}`]);
  });

  test('POST /v2.0/ports wraps the body in {port: ...} and sends JSON', async () => {
    const { c } = client();
    const body = { network_id: NET_ID, device_id: 'inst-1', tenant_id: 'proj-1', admin_state_up: true, security_groups: ['sg-1'] };
    const scope = nock(BASE).matchHeader('content-type', 'application/json').matchHeader('x-auth-token', 'token-1').post('/v2.0/ports', { port: body }).reply(201, { port: portBody() });
    expect((await c.createPort(body)).id).toBe(PORT_ID);
    scope.done();
  });

  test('PUT a port wraps the body in {port: ...}', async () => {
    const { c } = client();
    const body = { device_id: 'inst-1', device_owner: 'compute:nova', 'binding:host_id': 'cmp-1' };
    const scope = nock(BASE).put(`/v2.0/ports/${PORT_ID}`, { port: body }).reply(200, { port: portBody({ 'binding:host_id': 'cmp-1', 'binding:vif_type': 'ovs' }) });
    expect((await c.updatePort(PORT_ID, body))['binding:vif_type']).toBe('ovs');
    scope.done();
  });

  test('list filters repeat the key per value (?id=a&id=b); an empty id list sends nothing', async () => {
    const { c, routes } = client();
    const scope = nock(BASE)
      .get('/v2.0/networks?id=a&id=b')
      .reply(200, { networks: [{ id: 'a', subnets: [] }, { id: 'b', subnets: ['s'], mtu: 1442 }] })
      .get('/v2.0/ports?device_id=inst-1&status=ACTIVE')
      .reply(200, { ports: [] })
      .get('/v2.0/security-groups?tenant_id=p&name=web&name=db&fields=id&fields=name')
      .reply(200, { security_groups: [{ id: 'sg-w', name: 'web' }] });
    const nets = await c.listNetworks(['a', 'b']);
    expect(nets.map((n) => [n.id, n.name, n.mtu])).toEqual([
      ['a', '', undefined],
      ['b', '', 1442],
    ]);
    expect(await c.listPorts({ device_id: 'inst-1', status: 'ACTIVE' })).toEqual([]);
    expect(await c.listSecurityGroups({ tenant_id: 'p', name: ['web', 'db'] })).toEqual([{ id: 'sg-w', name: 'web' }]);
    scope.done();
    expect(await c.listNetworks([])).toEqual([]);
    expect(await c.listSubnets([])).toEqual([]);
    expect(routes).toEqual(['GET /v2.0/networks', 'GET /v2.0/ports', 'GET /v2.0/security-groups']);
  });

  test('extensions are the aliases', async () => {
    const { c } = client();
    nock(BASE).get('/v2.0/extensions').reply(200, { extensions: [{ alias: 'dns-integration', name: 'DNS' }, { alias: 'binding-extended' }] });
    expect([...(await c.extensions())].sort()).toEqual(['binding-extended', 'dns-integration']);
  });

  test('port bindings: POST {binding: ...}, GET, activate, DELETE', async () => {
    const { c } = client();
    const binding = { host: 'cmp-2', vif_type: 'ovs', vif_details: { bridge_name: 'br-int' }, vnic_type: 'normal', profile: {}, status: 'INACTIVE' };
    const scope = nock(BASE)
      .post(`/v2.0/ports/${PORT_ID}/bindings`, { binding: { host: 'cmp-2', vnic_type: 'normal' } })
      .reply(201, { binding })
      .get(`/v2.0/ports/${PORT_ID}/bindings/cmp-2`)
      .reply(200, { binding })
      // Neutron 2025.1 answers activate with the binding bare, not under `binding` (read on the cloud).
      .put(`/v2.0/ports/${PORT_ID}/bindings/cmp-2/activate`)
      .reply(200, { ...binding, status: 'ACTIVE' })
      .delete(`/v2.0/ports/${PORT_ID}/bindings/cmp-2`)
      .reply(204)
      .delete(`/v2.0/ports/${PORT_ID}/bindings/cmp-3`)
      .reply(404, { NeutronError: { type: 'PortBindingNotFound', message: 'no binding' } });
    expect((await c.createBinding(PORT_ID, { host: 'cmp-2', vnic_type: 'normal' })).status).toBe('INACTIVE');
    expect((await c.getBinding(PORT_ID, 'cmp-2')).vif_details).toEqual({ bridge_name: 'br-int' });
    expect((await c.activateBinding(PORT_ID, 'cmp-2')).status).toBe('ACTIVE');
    expect(await c.deleteBinding(PORT_ID, 'cmp-2')).toBe(true);
    expect(await c.deleteBinding(PORT_ID, 'cmp-3')).toBe(false);
    scope.done();
  });

  test.each([['../networks'], ['a/b'], ['x?y=1'], [''], ['a b']])('a bad id %j is refused before any request', async (bad) => {
    const { c, routes } = client();
    await expect(c.getPort(bad)).rejects.toBeInstanceOf(NetworkRequestError);
    await expect(c.deletePort(bad)).rejects.toBeInstanceOf(NetworkRequestError);
    await expect(c.getBinding(PORT_ID, bad)).rejects.toBeInstanceOf(NetworkRequestError);
    expect(routes).toEqual([]);
    expect(nock.pendingMocks()).toEqual([]);
  });
});

describe('NeutronHttpClient: retries', () => {
  test('a 5xx is retried up to http_retries, with backoff, then NeutronUnavailableError', async () => {
    const { c, clock, routes } = client(2);
    const scope = nock(BASE).get(`/v2.0/ports/${PORT_ID}`).times(3).reply(503, 'busy');
    const err = await c.getPort(PORT_ID).catch((e: unknown) => e);
    scope.done();
    expect(err).toBeInstanceOf(NeutronUnavailableError);
    expect((err as Error).message).toMatch(new RegExp(`GET /v2.0/ports/${PORT_ID}: Neutron unavailable: answered 503`));
    expect(routes).toHaveLength(3);
    expect(clock.slept).toHaveLength(2);
    expect(clock.slept.every((ms) => ms > 0)).toBe(true);
  });

  test('a 5xx followed by a 2xx succeeds', async () => {
    const { c, clock } = client(2);
    nock(BASE).get(`/v2.0/ports/${PORT_ID}`).reply(500).get(`/v2.0/ports/${PORT_ID}`).reply(200, { port: portBody() });
    expect((await c.getPort(PORT_ID)).id).toBe(PORT_ID);
    expect(clock.slept).toHaveLength(1);
  });

  test('a refused connection is retried, then NeutronUnavailableError with the cause', async () => {
    // A real refusal: nothing listens on 127.0.0.1:1.
    nock.enableNetConnect('127.0.0.1');
    const routes: string[] = [];
    const auth: AuthProvider = { token: () => Promise.resolve('t'), endpoint: () => Promise.resolve('http://127.0.0.1:1'), invalidate: () => undefined };
    const c = new NeutronHttpClient({ auth, transport: new NodeHttpTransport({ timeoutMs: 5000 }), retries: 2, clock: new FakeClock(), onRequest: (m, r) => routes.push(`${m} ${r}`) });
    const err = await c.extensions().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NeutronUnavailableError);
    expect((err as Error).message).toMatch(/GET \/v2.0\/extensions: Neutron unavailable: .*ECONNREFUSED/);
    expect((err as Error).cause).toBeInstanceOf(TransportError);
    expect(routes).toHaveLength(3);
  });

  test('a refused connection then an answer succeeds; a create that got no answer is sent again', async () => {
    nock.enableNetConnect('127.0.0.1');
    // The first request of each call goes to a closed port, the next to the nock'd Neutron.
    let sent = 0;
    const real = new NodeHttpTransport({ timeoutMs: 5000 });
    const transport: HttpTransport = { send: (req) => real.send(sent++ % 2 === 0 ? { ...req, url: req.url.replace(BASE, 'http://127.0.0.1:1') } : req) };
    const c = new NeutronHttpClient({ auth: new CountingAuth(), transport, retries: 1, clock: new FakeClock() });
    nock(BASE).get('/v2.0/extensions').reply(200, { extensions: [] }).post('/v2.0/ports').reply(201, { port: portBody() });
    expect((await c.extensions()).size).toBe(0);
    expect((await c.createPort({ network_id: NET_ID })).id).toBe(PORT_ID);
    expect(sent).toBe(4);
  });

  test('POST /v2.0/ports whose request may have arrived (a timeout) is not sent again; a GET is', async () => {
    let sent = 0;
    const transport: HttpTransport = {
      send: () => {
        sent++;
        return Promise.reject(new TransportError('timeout of 30000 ms exceeded', 'ETIMEDOUT'));
      },
    };
    const c = new NeutronHttpClient({ auth: new CountingAuth(), transport, retries: 2, clock: new FakeClock() });
    await expect(c.createPort({ network_id: NET_ID })).rejects.toThrow(/POST \/v2.0\/ports: Neutron unavailable: timeout/);
    expect(sent).toBe(1);
    await expect(c.getPort(PORT_ID)).rejects.toBeInstanceOf(NeutronUnavailableError);
    expect(sent).toBe(4);
  });

  test('POST /v2.0/ports is not retried on a 5xx (it may have created the port)', async () => {
    const { c, routes, clock } = client(3);
    const scope = nock(BASE).post('/v2.0/ports').reply(500, { NeutronError: { type: 'HTTPInternalServerError', message: 'boom' } });
    const err = await c.createPort({ network_id: NET_ID }).catch((e: unknown) => e);
    scope.done();
    expect(err).toBeInstanceOf(NeutronUnavailableError);
    expect((err as Error).message).toMatch(/POST \/v2.0\/ports: Neutron unavailable: answered 500: HTTPInternalServerError: boom/);
    expect(routes).toEqual(['POST /v2.0/ports']);
    expect(clock.slept).toEqual([]);
  });

  test('a 401 invalidates the token and retries once with a fresh one', async () => {
    const { c, auth } = client(0);
    const first = nock(BASE, { reqheaders: { 'x-auth-token': 'token-1' } }).get(`/v2.0/ports/${PORT_ID}`).reply(401);
    const second = nock(BASE, { reqheaders: { 'x-auth-token': 'token-2' } }).get(`/v2.0/ports/${PORT_ID}`).reply(200, { port: portBody() });
    expect((await c.getPort(PORT_ID)).id).toBe(PORT_ID);
    first.done();
    second.done();
    expect(auth.invalidations).toBe(1);
  });

  test('a second 401 is NeutronAuthError (one re-auth only)', async () => {
    const { c, auth, routes } = client(3);
    nock(BASE).get(`/v2.0/ports/${PORT_ID}`).times(2).reply(401);
    await expect(c.getPort(PORT_ID)).rejects.toBeInstanceOf(NeutronAuthError);
    expect(auth.invalidations).toBe(1);
    expect(routes).toHaveLength(2);
  });

  test('no token to be had is NeutronAuthError naming the request, and nothing is sent', async () => {
    const auth: AuthProvider = { token: () => Promise.reject(new Error('keystone said no')), endpoint: () => Promise.resolve(BASE), invalidate: () => undefined };
    const routes: string[] = [];
    const c = new NeutronHttpClient({ auth, transport: new NodeHttpTransport({ timeoutMs: 5000 }), retries: 2, clock: new FakeClock(), onRequest: (m, r) => routes.push(`${m} ${r}`) });
    await expect(c.listPorts({ device_id: 'x' })).rejects.toThrow(/GET \/v2.0\/ports: keystone said no/);
    expect(routes).toEqual([]);
  });
});

describe('NeutronHttpClient: classification', () => {
  test('404 is NeutronNotFoundError; deletePort of a gone port resolves false, of a present one true', async () => {
    const { c } = client();
    nock(BASE)
      .get(`/v2.0/ports/${PORT_ID}`)
      .reply(404, { NeutronError: { type: 'PortNotFound', message: `Port ${PORT_ID} could not be found.` } })
      .delete(`/v2.0/ports/${PORT_ID}`)
      .reply(404, { NeutronError: { type: 'PortNotFound', message: 'gone' } })
      .delete(`/v2.0/ports/${PORT_ID}`)
      .reply(204);
    const err = await c.getPort(PORT_ID).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NeutronNotFoundError);
    expect((err as Error).message).toContain('PortNotFound');
    expect(await c.deletePort(PORT_ID)).toBe(false);
    expect(await c.deletePort(PORT_ID)).toBe(true);
  });

  test('floating IPs of a Neutron without the L3 API (404 on the collection) are none; other failures still throw', async () => {
    const { c } = client();
    const notFound = { NeutronError: { type: 'HTTPNotFound', message: 'The resource could not be found.' } };
    nock(BASE).get('/v2.0/floatingips').query({ port_id: PORT_ID }).reply(404, notFound);
    expect(await c.listFloatingIps(PORT_ID)).toEqual([]);
    nock(BASE).get('/v2.0/floatingips').query({ port_id: PORT_ID }).reply(403, { NeutronError: { type: 'Forbidden', message: 'no' } });
    await expect(c.listFloatingIps(PORT_ID)).rejects.toBeInstanceOf(NeutronRefusedError);
  });

  test('409 is NeutronConflictError with Neutron words', async () => {
    const { c } = client();
    nock(BASE).post('/v2.0/ports').reply(409, { NeutronError: { type: 'MacAddressInUse', message: 'Unable to complete operation for network. The mac address is in use.' } });
    const err = await c.createPort({ network_id: NET_ID }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NeutronConflictError);
    expect((err as Error).message).toMatch(/POST \/v2.0\/ports: .*\(409\): MacAddressInUse: Unable to complete operation/);
  });

  test('400 with a NeutronError body is NeutronRefusedError carrying type and message, not retried', async () => {
    const { c, routes } = client(3);
    nock(BASE).put(`/v2.0/ports/${PORT_ID}`).reply(400, { NeutronError: { type: 'InvalidInput', message: "Invalid input for operation: 'nope' is not a valid IP address.", detail: '' } });
    const err = await c.updatePort(PORT_ID, { fixed_ips: [{ ip_address: 'nope' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NeutronRefusedError);
    expect((err as NeutronRefusedError).status).toBe(400);
    expect((err as Error).message).toContain('InvalidInput');
    expect((err as Error).message).toContain("'nope' is not a valid IP address");
    expect(routes).toHaveLength(1);
  });

  test('403 and 413 are refusals too; a text body is quoted', async () => {
    const { c } = client();
    nock(BASE).post('/v2.0/ports').reply(413, { NeutronError: { type: 'OverQuota', message: 'Quota exceeded for resources: [port].' } }).get('/v2.0/extensions').reply(403, 'policy says no');
    const quota = await c.createPort({ network_id: NET_ID }).catch((e: unknown) => e);
    expect(quota).toBeInstanceOf(NeutronRefusedError);
    expect((quota as Error).message).toMatch(/\(413\): OverQuota: Quota exceeded/);
    const policy = await c.extensions().catch((e: unknown) => e);
    expect(policy).toBeInstanceOf(NeutronRefusedError);
    expect((policy as Error).message).toMatch(/\(403\): policy says no/);
  });

  test('a malformed 2xx is NeutronResponseError naming the field', async () => {
    const { c } = client();
    nock(BASE)
      .get(`/v2.0/ports/${PORT_ID}`)
      .reply(200, { port: portBody({ mac_address: 42 }) })
      .get('/v2.0/networks?id=a')
      .reply(200, { nets: [] })
      .get('/v2.0/subnets?id=s')
      .reply(200, { subnets: [{ id: 's', network_id: 'a', cidr: '10.0.0.0/24', ip_version: 5, gateway_ip: null, enable_dhcp: true }] });
    const bad = await c.getPort(PORT_ID).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(NeutronResponseError);
    expect((bad as Error).message).toMatch(new RegExp(`GET /v2.0/ports/${PORT_ID}: unexpected answer from Neutron: port\\.mac_address`));
    await expect(c.listNetworks(['a'])).rejects.toThrow(/unexpected answer from Neutron: networks:/);
    await expect(c.listSubnets(['s'])).rejects.toThrow(/subnets\.0\.ip_version/);
  });
});

describe('the route a request is counted under', () => {
  test('ids become {id}, a binding host {host}, the query goes', () => {
    expect(neutronRoute('/v2.0/ports/6f1c2a8e-0b4d-4c4e-9a51-2f7d3c1b9e00/bindings/compute-a/activate')).toBe('/v2.0/ports/{id}/bindings/{host}/activate');
    expect(neutronRoute('/v2.0/ports?device_id=6f1c2a8e-0b4d-4c4e-9a51-2f7d3c1b9e00')).toBe('/v2.0/ports');
    expect(neutronRoute('/v2.0/extensions')).toBe('/v2.0/extensions');
  });

  test('each answer is reported with its status and time, a failed connection as error', async () => {
    const answers: string[] = [];
    const c = new NeutronHttpClient({ auth: new CountingAuth(), transport: new NodeHttpTransport({ timeoutMs: 5000 }), retries: 0, clock: new FakeClock(), onAnswer: (m, r, s, t) => answers.push(`${m} ${r} ${s} ${t >= 0}`) });
    const id = '6f1c2a8e-0b4d-4c4e-9a51-2f7d3c1b9e00';
    nock(BASE).get(`/v2.0/ports/${id}`).reply(404, { NeutronError: { type: 'PortNotFound', message: 'gone' } });
    await expect(c.getPort(id)).rejects.toThrow(/404/);
    expect(answers).toEqual(['GET /v2.0/ports/{id} 404 true']);
  });
});
