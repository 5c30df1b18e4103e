// The network arguments as nova sends them (NetworkRequestList and InstanceExternalEvent object
// primitives) and as plain JSON, decoded by the method rows' decoders; bad input is refused naming
// the field.
import { decodeArgs } from '../../../../agent/rpc/endpoint/args';
import { networkArgs as N } from '../../../../agent/compute/decode-network';

const NET = '0b1e8a7c-2f4d-4c6e-8a9b-1c2d3e4f5a6b';
const PORT = '5f0c3a0e-1d7b-4a55-9d0e-3c1f6a2b7e01';
const INST = 'a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d';

const prim = (name: string, version: string, data: Record<string, unknown>): Record<string, unknown> => ({
  'nova_object.name': name,
  'nova_object.namespace': 'nova',
  'nova_object.version': version,
  'nova_object.data': data,
  'nova_object.changes': Object.keys(data),
});
/** A NetworkRequest as nova 2025.1 sends it (1.3: network_id, address, port_id, pci_request_id, tag, ...). */
const request = (data: Record<string, unknown>): Record<string, unknown> =>
  prim('NetworkRequest', '1.3', { network_id: null, address: null, port_id: null, pci_request_id: null, tag: null, requester_id: null, device_profile: null, arq_uuid: null, ...data });
const requestList = (...objects: Record<string, unknown>[]): Record<string, unknown> => prim('NetworkRequestList', '1.1', { objects });

const build = (args: Record<string, unknown>): { requested_networks: unknown; security_groups: unknown } =>
  decodeArgs('build_and_run_instance', { requested_networks: N.requestedNetworks, security_groups: N.securityGroups }, args);

describe('requested_networks', () => {
  test('a NetworkRequestList primitive: a network, a network with a fixed IP and tag, a port', () => {
    const sent = requestList(request({ network_id: NET }), request({ network_id: NET, address: '10.0.0.9', tag: 'nic1' }), request({ port_id: PORT }));
    expect(build({ requested_networks: sent }).requested_networks).toEqual({
      kind: 'list',
      requests: [
        { kind: 'network', network_id: NET },
        { kind: 'network', network_id: NET, address: '10.0.0.9', tag: 'nic1' },
        { kind: 'port', port_id: PORT },
      ],
    });
  });

  test("nova's 'none' and 'auto' (one request whose network_id says so)", () => {
    expect(build({ requested_networks: requestList(request({ network_id: 'none' })) }).requested_networks).toEqual({ kind: 'none' });
    expect(build({ requested_networks: requestList(request({ network_id: 'auto' })) }).requested_networks).toEqual({ kind: 'auto' });
    // 'auto' only means auto on its own; beside a port it would be a network named 'auto'.
    expect(build({ requested_networks: [{ network_id: 'auto' }, { port_id: PORT }] }).requested_networks).toMatchObject({ kind: 'list' });
  });

  test('absent, null and an empty list are no network; plain lists decode as the primitives do', () => {
    expect(build({}).requested_networks).toEqual({ kind: 'none' });
    expect(build({ requested_networks: null }).requested_networks).toEqual({ kind: 'none' });
    expect(build({ requested_networks: requestList() }).requested_networks).toEqual({ kind: 'none' });
    expect(build({ requested_networks: [] }).requested_networks).toEqual({ kind: 'none' });
    expect(build({ requested_networks: [{ network_id: NET, address: '10.0.0.9' }, { port_id: PORT, tag: 't' }] }).requested_networks).toEqual({
      kind: 'list',
      requests: [
        { kind: 'network', network_id: NET, address: '10.0.0.9' },
        { kind: 'port', port_id: PORT, tag: 't' },
      ],
    });
  });

  test.each([
    ['a request with neither network nor port', [{ address: '10.0.0.9' }], /argument 'requested_networks'.*requested_networks\.0: needs a network_id or a port_id/],
    ['a port id that is not a UUID', [{ port_id: '../x' }], /argument 'requested_networks'.*requested_networks\.0\.port_id: a UUID/],
    ['a string', 'net-1', /argument 'requested_networks': expected a NetworkRequestList/],
    ['a network id of the wrong type', [{ network_id: 7 }], /argument 'requested_networks'.*requested_networks\.0\.network_id: Invalid input: expected string, received number/],
  ])('%s is refused naming the field', (_what, value, message) => {
    expect(() => build({ requested_networks: value })).toThrow(message);
  });
});

describe('security_groups', () => {
  test('names or ids; absent or null is none', () => {
    expect(build({ security_groups: ['default', 'web'] }).security_groups).toEqual(['default', 'web']);
    expect(build({}).security_groups).toEqual([]);
    expect(build({ security_groups: null }).security_groups).toEqual([]);
  });

  test('an empty name or a non-list is refused naming the field', () => {
    expect(() => build({ security_groups: ['web', ''] })).toThrow(/argument 'security_groups'.*security_groups\.1: a name or id/);
    expect(() => build({ security_groups: 'web' })).toThrow(/argument 'security_groups': expected a list of security group names/);
  });
});

describe('external_instance_event events', () => {
  const events = (v: unknown): unknown => decodeArgs('external_instance_event', { events: N.externalEvents }, { events: v }).events;

  test('InstanceExternalEvent 1.5 primitives as nova-api casts them', () => {
    const sent = [
      prim('InstanceExternalEvent', '1.5', { instance_uuid: INST, name: 'network-vif-plugged', status: 'completed', tag: PORT, data: {} }),
      prim('InstanceExternalEvent', '1.5', { instance_uuid: INST, name: 'network-vif-plugged', status: 'failed', tag: PORT }),
      prim('InstanceExternalEvent', '1.5', { instance_uuid: INST, name: 'network-changed', status: 'completed', tag: null }),
    ];
    expect(events(sent)).toEqual([
      { instance_uuid: INST, name: 'network-vif-plugged', status: 'completed', tag: PORT, data: {} },
      { instance_uuid: INST, name: 'network-vif-plugged', status: 'failed', tag: PORT, data: undefined },
      { instance_uuid: INST, name: 'network-changed', status: 'completed', tag: null, data: undefined },
    ]);
  });

  test('plain JSON; status defaults to completed', () => {
    expect(events([{ instance_uuid: INST, name: 'network-vif-deleted', tag: PORT }])).toEqual([{ instance_uuid: INST, name: 'network-vif-deleted', status: 'completed', tag: PORT, data: undefined }]);
  });

  test('bad events are refused naming the field', () => {
    expect(() => events([{ instance_uuid: 'nope', name: 'network-changed' }])).toThrow(/argument 'events'.*events\.0\.instance_uuid: a UUID/);
    expect(() => events([{ instance_uuid: INST, name: '' }])).toThrow(/argument 'events'.*events\.0\.name: an event name/);
    expect(() => events([{ instance_uuid: INST }])).toThrow(/argument 'events'.*events\.0\.name: missing/);
    expect(() => events({ instance_uuid: INST, name: 'x' })).toThrow(/argument 'events': expected a list of InstanceExternalEvents/);
  });
});
