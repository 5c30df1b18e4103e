/**
 * A Placement transport for outage tests: in front of the node:http transport (which nock's mocked
 * Placement intercepts), it refuses the next `refuse` requests with ECONNREFUSED, as a stopped
 * Placement does, and with `loseAnswers` sends the next writes and then fails with ECONNRESET, as
 * when the answer to a write that landed is lost.
 */
import { NodeHttpTransport, TransportError, type HttpTransport, type TransportRequest, type TransportResponse } from '../../tracker/placement/transport';

export class OutageTransport implements HttpTransport {
  refuse = 0;
  loseAnswers = 0;
  private readonly inner = new NodeHttpTransport();

  async send(req: TransportRequest): Promise<TransportResponse> {
    if (this.refuse > 0) {
      this.refuse--;
      throw new TransportError(`connect ECONNREFUSED (${req.method})`, 'ECONNREFUSED');
    }
    const res = await this.inner.send(req);
    if (this.loseAnswers > 0 && req.method !== 'GET') {
      this.loseAnswers--;
      throw new TransportError('socket hang up', 'ECONNRESET');
    }
    return res;
  }
}
