/**
 * network-boot: what a network adds to a boot, through nova's own API on the whole small cloud
 * (scripts/cloud: nova 31, Neutron 2025.1 with ML2/OVN, agents on the qemu driver under TCG). On
 * one host, N servers boot one after another on the tenant network, then N with `networks: none`,
 * and that host's agent metrics are read around each set:
 *
 * - the agent's build time, from taking the cast to ACTIVE (`rpc_method_seconds` of
 *   build_and_run_instance), and nova-api's POST to ACTIVE as the user sees it;
 * - Neutron's share: the time of every Neutron request the agent made (`neutron_request_seconds`);
 * - OVN's share: the wait for network-vif-plugged (`vif_plug_wait_seconds`), which is Neutron
 *   hearing from ovn-controller that the port is wired;
 * - the agent's own time: the build less those two, beside the same build with no network;
 * - Neutron requests per boot (`neutron_requests_total`, by route in the details);
 * - memory per plugged port: the agent's and the host's ovs-vswitchd resident memory with the N
 *   servers running, less before them, for servers with a port against servers without one.
 *
 * Runs on the cloud that is up (left up), or brings one up and takes it down after. Goals and
 * nova-compute's own count of Neutron requests for this boot (from its code) are in the README's
 * section on this scenario; nothing here is typed in.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CloudApi, cloudRunning, runScript } from './cloud-api';
import { median, round, type BenchOptions, type BenchResult, type BenchRow } from './lib';
import { statusMbs } from './proc';

/** Sums of the samples of one metric family whose labels include `match`. */
function metricSum(text: string, name: string, match: Readonly<Record<string, string>> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const labels = /\{([^}]*)\}/.exec(line)?.[1] ?? '';
    if (!Object.entries(match).every(([k, v]) => labels.includes(`${k}="${v}"`))) continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

/** Per-route sample counts of `neutron_requests_total`. */
function neutronRoutes(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^compute_agent_neutron_requests_total\{method="([^"]+)",route="([^"]+)",status="[^"]+"\} (\S+)$/gm)) {
    const key = `${m[1]} ${m[2]}`;
    out[key] = (out[key] ?? 0) + Number(m[3]);
  }
  return out;
}

interface Snapshot {
  readonly text: string;
  readonly agentMb: number;
  readonly ovsMb: number;
}

interface SetResult {
  readonly boots: number;
  /** nova-api's POST to ACTIVE, per boot (s). */
  readonly apiSeconds: number[];
  readonly buildSeconds: number;
  readonly neutronSeconds: number;
  readonly vifWaitSeconds: number;
  readonly neutronRequests: number;
  readonly routes: Record<string, number>;
  readonly agentMbPerServer: number;
  readonly ovsMbPerServer: number;
}

class NetworkBoot {
  constructor(
    private readonly api: CloudApi,
    private readonly host: string,
  ) {}

  private pid(file: string): number {
    return Number(readFileSync(file, 'utf8').trim());
  }

  async snapshot(): Promise<Snapshot> {
    const text = await (await fetch(this.api.metricsUrl(this.host))).text();
    const agentMb = statusMbs(this.pid(join(this.api.env.CLOUD_DIR ?? '', 'hosts', this.host, 'agent.pid')), ['VmRSS']).VmRSS;
    const ovsMb = statusMbs(this.pid(join(this.api.env.NEUTRON_DIR ?? '', 'hosts', this.host, 'ovs-vswitchd.pid')), ['VmRSS']).VmRSS;
    return { text, agentMb, ovsMb };
  }

  /** POST /servers on this host; resolves the id once ACTIVE, with the seconds it took. */
  async boot(name: string, networks: unknown, image: string): Promise<{ id: string; seconds: number }> {
    const t0 = Date.now();
    const created = await this.api.must<{ id: string }>(
      'nova',
      'POST',
      '/servers',
      { server: { name, imageRef: image, flavorRef: 'ca-net', networks, ...(networks === 'none' ? {} : { security_groups: [{ name: 'ca-guests' }] }), host: this.host } },
      'server',
      '2.74',
    );
    for (;;) {
      const s = await this.api.must<{ status: string; 'OS-EXT-STS:task_state': string | null; fault?: { message: string } }>('nova', 'GET', `/servers/${created.id}`, undefined, 'server');
      if (s.status === 'ACTIVE' && s['OS-EXT-STS:task_state'] === null) return { id: created.id, seconds: (Date.now() - t0) / 1000 };
      if (s.status === 'ERROR') throw new Error(`network-boot: server ${created.id} went to ERROR: ${s.fault?.message ?? '(no fault)'}`);
      if (Date.now() - t0 > 300_000) throw new Error(`network-boot: server ${created.id} not ACTIVE within 300 s`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  async remove(ids: readonly string[]): Promise<void> {
    for (const id of ids) await this.api.call('nova', 'DELETE', `/servers/${id}`);
    for (const id of ids) {
      const t0 = Date.now();
      while ((await this.api.call('nova', 'GET', `/servers/${id}`)).status !== 404 && Date.now() - t0 < 120_000) await new Promise((r) => setTimeout(r, 500));
    }
  }

  /** `n` boots one after another with `networks`; the metrics around them; the servers deleted after. */
  async set(n: number, networks: unknown, image: string, tag: string): Promise<SetResult> {
    const before = await this.snapshot();
    const ids: string[] = [];
    const apiSeconds: number[] = [];
    try {
      for (let i = 0; i < n; i++) {
        const b = await this.boot(`bench-${tag}-${i}`, networks, image);
        ids.push(b.id);
        apiSeconds.push(round(b.seconds, 2));
      }
      // Settled: the agent's periodic work after the boots is not what is measured.
      await new Promise((r) => setTimeout(r, 3_000));
      const after = await this.snapshot();
      const delta = (name: string, match: Readonly<Record<string, string>> = {}): number => metricSum(after.text, name, match) - metricSum(before.text, name, match);
      const build = { method: 'build_and_run_instance' };
      const builds = delta('compute_agent_rpc_method_seconds_count', build);
      const routesBefore = neutronRoutes(before.text);
      const routes: Record<string, number> = {};
      for (const [k, v] of Object.entries(neutronRoutes(after.text))) {
        const perBoot = round((v - (routesBefore[k] ?? 0)) / n, 2);
        if (perBoot !== 0) routes[k] = perBoot;
      }
      return {
        boots: builds,
        apiSeconds,
        buildSeconds: delta('compute_agent_rpc_method_seconds_sum', build) / n,
        neutronSeconds: delta('compute_agent_neutron_request_seconds_sum') / n,
        vifWaitSeconds: delta('compute_agent_vif_plug_wait_seconds_sum') / n,
        neutronRequests: delta('compute_agent_neutron_requests_total') / n,
        routes,
        agentMbPerServer: (after.agentMb - before.agentMb) / n,
        ovsMbPerServer: (after.ovsMb - before.ovsMb) / n,
      };
    } finally {
      await this.remove(ids);
    }
  }
}

export async function runNetworkBootBench(opts: BenchOptions): Promise<BenchResult> {
  const running = await cloudRunning();
  if (!running) await runScript('cloud', ['up']);
  try {
    const api = await CloudApi.connect();
    const host = api.hosts[0] ?? '';
    const network = (await api.must<Array<{ id: string }>>('neutron', 'GET', '/networks?name=private', undefined, 'networks'))[0]?.id ?? '';
    const image = (await api.must<Array<{ id: string }>>('glance', 'GET', '/v2/images?name=net-guest', undefined, 'images'))[0]?.id ?? '';
    if (!network || !image) throw new Error('network-boot: the cloud has no network "private" or image "net-guest" (scripts/cloud up makes them)');
    const n = opts.quick ? 1 : 3;
    const bench = new NetworkBoot(api, host);
    // One boot first, not measured: the host fetches the image from Glance once, and whichever set
    // came first would pay for it.
    const warm = await bench.boot('bench-warm-up', 'none', image);
    await bench.remove([warm.id]);
    const none = await bench.set(n, 'none', image, 'none');
    const net = await bench.set(n, [{ uuid: network }], image, 'net');
    const s = `boot through nova's API, ${n} servers one at a time on ${host}: one port (ML2/OVN) / no network`;
    const own = (r: SetResult): number => r.buildSeconds - r.neutronSeconds - r.vifWaitSeconds;
    const pair = (a: number, b: number, digits = 2): string => `${round(a, digits)} / ${round(b, digits)}`;
    const rows: BenchRow[] = [
      { scenario: s, metric: "POST to ACTIVE, nova-api's view (median)", value: `${pair(median(net.apiSeconds), median(none.apiSeconds))} s` },
      { scenario: s, metric: "the agent's build, cast to ACTIVE", value: `${pair(net.buildSeconds, none.buildSeconds)} s` },
      { scenario: s, metric: '… of it Neutron requests, the wait for network-vif-plugged (OVN), with a port', value: `${pair(net.neutronSeconds, net.vifWaitSeconds)} s` },
      { scenario: s, metric: "… the agent's own: the build less those two", value: `${pair(own(net), own(none))} s`, goal: 'one port adds < 0.5 s' },
      { scenario: s, metric: 'Neutron requests per boot', value: pair(net.neutronRequests, none.neutronRequests, 1) },
      { scenario: s, metric: 'resident memory per server: agent, ovs-vswitchd (MB)', value: `${pair(net.agentMbPerServer, none.agentMbPerServer)}, ${pair(net.ovsMbPerServer, none.ovsMbPerServer)}` },
    ];
    return { name: 'network-boot', rows, details: { host, servers: n, withNetwork: net, withoutNetwork: none } };
  } finally {
    if (!running) await runScript('cloud', ['down'], 600_000);
  }
}

