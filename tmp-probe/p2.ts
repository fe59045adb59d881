import { RabbitRetry } from '../lib';
(async () => {
  const rr = await RabbitRetry.connect({ url: 'amqp://guest:guest@127.0.0.1:5676' });
  const c = await rr.consume({ queue: 'probe-bd2', queueType: 'quorum', onFailure: { brokerDelay: { min: '60s', max: '60s', attempts: 3 } } }, async () => { throw new Error('x'); });
  for (let i = 0; i < 4; i++) await rr.publish('', 'probe-bd2', { i });
  await new Promise((r) => setTimeout(r, 1000));
  await c.close(); await rr.close();
})();
