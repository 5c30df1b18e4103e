/**
 * The `[vnc]`, `[serial_console]` and `[consoleauth]` sections: the consoles a guest offers to
 * nova's console proxies (nova-novncproxy, nova-serialproxy), with nova's option names and
 * defaults. A console listens on this host (`server_listen`, or the serial console's
 * `proxyclient_address`, as nova's libvirt driver binds it); the proxy is told to connect to the
 * `proxyclient_address`; the user is given a URL on the proxy (`*_base_url`) with a token that
 * nova keeps for `token_ttl` seconds.
 *
 * It is: declarations only. It is not: the proxies (nova's), nor the guests' devices
 * (`virt-drivers/qemu/cmdline.ts`).
 */
import { isIP } from 'node:net';
import { z } from 'zod';
import { bool, httpUrl, int, option, portRange } from '../types';

/** oslo's HostAddressOpt: an IP address or a host name. */
const hostAddress = (): z.ZodType<string, string> =>
  z.string().transform((raw, ctx) => {
    const v = raw.trim();
    if (isIP(v) !== 0 || /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/.test(v)) return v;
    ctx.addIssue({ code: 'custom', message: 'neither an IP address nor a host name' });
    return z.NEVER;
  });

/** A websocket URL (ws:// or wss://). */
const wsUrl = (): z.ZodType<string, string> =>
  z.string().transform((raw, ctx) => {
    const v = raw.trim();
    try {
      const u = new URL(v);
      if (u.protocol === 'ws:' || u.protocol === 'wss:') return v;
    } catch {
      // reported below
    }
    ctx.addIssue({ code: 'custom', message: 'not a ws:// or wss:// URL' });
    return z.NEVER;
  });

const requiredHttpUrl = (): z.ZodType<string, string> =>
  httpUrl().transform((v, ctx) => {
    if (v !== undefined) return v;
    ctx.addIssue({ code: 'custom', message: 'must not be empty' });
    return z.NEVER;
  });

export const vncSection = z.object({
  enabled: option(bool(), {
    help:
      "Whether guests get a display and a VNC server for nova's noVNC proxy (nova's default). The display is " +
      'part of the guest: a change applies to servers built afterwards.',
    default: 'true',
    expected: 'true or false',
  }),
  server_listen: option(hostAddress(), {
    help: "Address the guests' VNC servers listen on (in [qemu] network_namespace when that is set): this host's address on the network nova-novncproxy reaches.",
    default: '127.0.0.1',
    expected: 'an IP address or a host name',
  }),
  server_proxyclient_address: option(hostAddress(), {
    help: 'Address nova-novncproxy is told to connect to for this host\'s VNC consoles.',
    default: '127.0.0.1',
    expected: 'an IP address or a host name',
  }),
  novncproxy_base_url: option(requiredHttpUrl(), {
    help: "The noVNC page users are sent to; the console's token is added to it.",
    default: 'http://127.0.0.1:6080/vnc_auto.html',
    expected: 'an http(s) URL such as http://127.0.0.1:6080/vnc_lite.html',
  }),
});

export const serialConsoleSection = z.object({
  enabled: option(bool(), {
    help: "Whether a guest's serial console is offered to nova's serial proxy (a TCP port per guest; its output is still logged).",
    default: 'false',
    expected: 'true or false',
  }),
  port_range: option(portRange(':'), {
    help: 'TCP ports a serial console may take; each guest takes the first one free.',
    default: '10000:20000',
    expected: 'MIN:MAX, e.g. 10000:20000',
  }),
  base_url: option(wsUrl(), {
    help: "The serial proxy's URL users are given; the console's token is added to it.",
    default: 'ws://127.0.0.1:6083/',
    expected: 'a ws:// or wss:// URL',
  }),
  proxyclient_address: option(hostAddress(), {
    help: 'Address the serial consoles listen on, and that nova-serialproxy is told to connect to.',
    default: '127.0.0.1',
    expected: 'an IP address or a host name',
  }),
});

export const consoleauthSection = z.object({
  token_ttl: option(int(1), {
    help: "Seconds a console's token stays valid in nova.",
    default: '600',
    expected: 'an integer >= 1 (seconds)',
  }),
});
