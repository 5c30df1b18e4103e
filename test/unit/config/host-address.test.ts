// [DEFAULT] my_ip: nova's default (the address the IPv4 default route leaves by) and its validation.
import type { NetworkInterfaceInfo } from 'node:os';
import { defaultRouteInterface, primaryAddress } from '../../../config/host-address';
import { loadConfig } from '../../../config/loader';

const ROUTES = [
  'Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT',
  'eth1\t00000000\t0102A8C0\t0003\t0\t0\t200\t00000000\t0\t0\t0',
  'eth0\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0',
  'eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0',
].join('\n');

const addr = (address: string, family: 'IPv4' | 'IPv6', internal = false): NetworkInterfaceInfo =>
  ({ address, family, internal, netmask: '', mac: '', cidr: null, ...(family === 'IPv6' ? { scopeid: 0 } : {}) }) as NetworkInterfaceInfo;

const IFACES = {
  lo: [addr('127.0.0.1', 'IPv4', true)],
  eth1: [addr('192.168.2.5', 'IPv4')],
  eth0: [addr('fe80::1', 'IPv6'), addr('192.0.2.7', 'IPv4')],
};

test('the default route with the lowest metric names the interface; its first IPv4 address is my_ip', () => {
  expect(defaultRouteInterface(ROUTES)).toBe('eth0');
  expect(primaryAddress({ routes: () => ROUTES, interfaces: () => IFACES })).toBe('192.0.2.7');
});

test('without a default route: the first non-loopback IPv4 address; with none at all: 127.0.0.1', () => {
  expect(primaryAddress({ routes: () => undefined, interfaces: () => IFACES })).toBe('192.168.2.5');
  expect(primaryAddress({ routes: () => ROUTES.split('\n')[0], interfaces: () => ({ lo: IFACES.lo }) })).toBe('127.0.0.1');
});

test('my_ip defaults to this host\'s primary address and takes IPv4 or IPv6 as written', () => {
  const load = (env: Record<string, string>) => loadConfig({ files: [], env: { COMPUTE_AGENT__DEFAULT__STATE_PATH: '/nonexistent/state', ...env }, defaultFile: '/nonexistent/compute-agent.conf' }).config.DEFAULT;
  expect(load({}).my_ip).toBe(primaryAddress());
  expect(load({ COMPUTE_AGENT__DEFAULT__MY_IP: ' 2001:db8::5 ' }).my_ip).toBe('2001:db8::5');
  expect(load({}).nova_service_version).toBe('auto');
  expect(load({ COMPUTE_AGENT__DEFAULT__NOVA_SERVICE_VERSION: '68' }).nova_service_version).toBe(68);
});
