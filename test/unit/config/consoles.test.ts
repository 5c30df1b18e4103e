// [vnc], [serial_console] and [consoleauth]: nova's defaults (VNC on at loopback, the serial
// console off, 600 s tokens), values taken through to the qemu driver's options, and one clear
// line per bad value.
import { qemuOptionsFromConfig } from '../../../virt-drivers/qemu/options';
import { configFromEnv, configProblems } from '../../helpers/config';

describe('[vnc], [serial_console], [consoleauth]', () => {
  test("nova's defaults", () => {
    const config = configFromEnv({});
    expect(config.vnc).toEqual({ enabled: true, server_listen: '127.0.0.1', server_proxyclient_address: '127.0.0.1', novncproxy_base_url: 'http://127.0.0.1:6080/vnc_auto.html' });
    expect(config.serial_console).toEqual({ enabled: false, port_range: { min: 10000, max: 20000 }, base_url: 'ws://127.0.0.1:6083/', proxyclient_address: '127.0.0.1' });
    expect(config.consoleauth.token_ttl).toBe(600);
    expect(qemuOptionsFromConfig(config).consoles).toEqual({ vnc: { listen: '127.0.0.1', proxyclientAddress: '127.0.0.1' }, serial: null });
  });

  test('set values reach the driver', () => {
    const o = qemuOptionsFromConfig(
      configFromEnv({
        COMPUTE_AGENT__VNC__ENABLED: 'false',
        COMPUTE_AGENT__SERIAL_CONSOLE__ENABLED: 'true',
        COMPUTE_AGENT__SERIAL_CONSOLE__PORT_RANGE: '12000:12099',
        COMPUTE_AGENT__SERIAL_CONSOLE__PROXYCLIENT_ADDRESS: 'compute-a.example.org',
      }),
    );
    expect(o.consoles).toEqual({ vnc: null, serial: { address: 'compute-a.example.org', ports: { min: 12000, max: 12099 } } });
  });

  test('bad values: one line each, naming the option and the expected form', () => {
    const lines = configProblems(() =>
      configFromEnv({
        COMPUTE_AGENT__VNC__SERVER_LISTEN: 'not an address!',
        COMPUTE_AGENT__VNC__NOVNCPROXY_BASE_URL: 'ftp://proxy/vnc.html',
        COMPUTE_AGENT__SERIAL_CONSOLE__PORT_RANGE: '20000-10000',
        COMPUTE_AGENT__SERIAL_CONSOLE__BASE_URL: 'http://127.0.0.1:6083/',
        COMPUTE_AGENT__CONSOLEAUTH__TOKEN_TTL: '0',
      }),
    );
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^vnc\.server_listen = .*neither an IP address nor a host name.*an IP address or a host name/),
        expect.stringMatching(/^vnc\.novncproxy_base_url = .*scheme must be http or https/),
        expect.stringMatching(/^serial_console\.port_range = .*not a port range.*MIN:MAX/),
        expect.stringMatching(/^serial_console\.base_url = .*not a ws:\/\/ or wss:\/\/ URL/),
        expect.stringMatching(/^consoleauth\.token_ttl = .*must be >= 1/),
      ]),
    );
    expect(lines).toHaveLength(5);
  });
});
