// A build's create.start report and its claim overlap (in nova mode the report is conductor round
// trips), while the steps still reach the control plane in order, on success and on failure.
import nock from 'nock';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { MemoryNotifier, type RequestContext } from '../../../../agent/compute/ports';
import { NotifierControlPlane } from '../../../../agent/compute/control-plane';
import type { InstanceRecord } from '../../../../model/instance';
import type { FlowStep } from '../../../../agent/compute/transitions';
import { MockPlacement } from '../../../helpers/mock-placement';
import { InProcessPeers, instanceArgs, makeHost } from '../../../helpers/compute-harness';

const CTX = { request_id: 'req-test' };

/** Standalone control plane whose create.start report is held until `release()`. */
class HeldStartControlPlane extends NotifierControlPlane {
  readonly notes = new MemoryNotifier();
  /** Steps in the order their reports completed, with the record's state as reported. */
  readonly done: Array<{ step: FlowStep; vm: string; task: string | null }> = [];
  private releaseStart: () => void = () => undefined;
  private readonly held = new Promise<void>((r) => (this.releaseStart = r));
  startBegun = false;

  constructor() {
    const notes = new MemoryNotifier();
    super(notes, 'host-a', () => undefined);
    this.notes = notes;
  }

  release(): void {
    this.releaseStart();
  }

  override async step(rec: InstanceRecord, step: FlowStep, ctx: RequestContext, fault?: string): Promise<void> {
    const seen = { step, vm: rec.vm_state, task: rec.task_state };
    if (step === 'create.start') {
      this.startBegun = true;
      await this.held;
    }
    await super.step(rec, step, ctx, fault);
    this.done.push(seen);
  }
}

async function setup(): Promise<{ mock: MockPlacement; cp: HeldStartControlPlane; call: (args: Record<string, unknown>) => Promise<unknown>; root: string }> {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const peers = new InProcessPeers();
  const cp = new HeldStartControlPlane();
  const host = await makeHost('host-a', api, peers, undefined, cp);
  return { mock, cp, call: (args) => peers.call('host-a', 'build_and_run_instance', args, CTX), root: host.rootUuid };
}

const until = async (cond: () => boolean): Promise<void> => {
  for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
  if (!cond()) throw new Error('condition not reached');
};

afterEach(() => nock.cleanAll());

describe('build: create.start overlaps the claim', () => {
  test('the claim is written while create.start is still being reported; create.end comes after it', async () => {
    const { mock, cp, call } = await setup();
    mock.requests.length = 0;
    const inst = instanceArgs();
    const build = call({ instance: inst });
    await until(() => mock.writes().length === 1);
    expect(cp.startBegun).toBe(true);
    expect(cp.done).toEqual([]);
    cp.release();
    await build;
    expect(cp.done.map((d) => d.step)).toEqual(['create.start', 'create.claimed', 'create.networked', 'create.volumes', 'create.end']);
    // The report was made from the record as it was when the build began, not as the claim left it.
    expect(cp.done[0]).toEqual({ step: 'create.start', vm: 'building', task: 'scheduling' });
    expect(cp.notes.sent.map((n) => n.event_type)).toEqual(['instance.create.start', 'instance.create.end']);
  });

  test('a claim refused while create.start is held: the error is reported after the start', async () => {
    const { mock, cp, call, root } = await setup();
    const inst = instanceArgs();
    // Someone else holds this consumer: the claim conflicts.
    mock.consumers.set(String(inst.uuid), { allocations: { [root]: { VCPU: 1 } }, project_id: 'p', user_id: 'u', generation: 1 });
    mock.requests.length = 0;
    const build = call({ instance: inst });
    await until(() => mock.writes().some((w) => w.method === 'PUT' && w.path === `/allocations/${String(inst.uuid)}`));
    expect(cp.done).toEqual([]);
    cp.release();
    await build;
    expect(cp.done.map((d) => d.step)).toEqual(['create.start', 'create.error']);
  });
});
