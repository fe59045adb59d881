/**
 * The outbox relay of the fault suite, run as a child process so a test can
 * SIGKILL it mid-batch: it connects with `outbox: { url: OUTBOX_URL }` and
 * publishes until it is killed or gets SIGTERM.
 */
import { RabbitRetry } from '../../lib';

async function main(): Promise<void> {
  const rr = await RabbitRetry.connect({
    connectionName: `fault-relay-${process.pid}`,
    outbox: { url: process.env.OUTBOX_URL ?? '', batchSize: Number(process.env.OUTBOX_BATCH ?? '100') },
  });
  console.log(JSON.stringify({ event: 'ready', url: rr.url }));
  process.on('SIGTERM', () => {
    void rr.close().then(() => process.exit(0));
  });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
