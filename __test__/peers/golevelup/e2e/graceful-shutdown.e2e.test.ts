// Ported from github.com/golevelup/nestjs (af1c8d7), integration/rabbitmq/e2e/graceful-shutdown.e2e-spec.ts.
// (The MIT License) Copyright (c) 2019 Jesse Carter. Changes from upstream: __test__/peers/CHANGES.md.
import {
  AmqpConnection,
  RabbitRetryModule,
  RabbitSubscribe,
} from '../../../../lib/nestjs';
import { INestApplication, Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { getRabbitMQUri } from './utils';

const testHandler = jest.fn();

const routingKey1 = 'longConsumerRoutingKey';
let subscriberResolve: (value: unknown) => void;

async function delay(milliseconds = 0, returnValue) {
  return new Promise((done) =>
    setTimeout(() => done(returnValue), milliseconds),
  );
}

async function isFinished(promise) {
  return await Promise.race([
    delay(0, false),
    promise.then(
      () => true,
      () => true,
    ),
  ]);
}

@Injectable()
class SubscribeService {
  @RabbitSubscribe({
    queue: routingKey1,
  })
  async handleSubscribe(message: object) {
    await new Promise((resolve) => {
      subscriberResolve = resolve;
    });
    testHandler(message);
  }
}

describe('Rabbit Graceful Shutdown', () => {
  let app: INestApplication;
  let amqpConnection: AmqpConnection;

  const uri = getRabbitMQUri();

  beforeAll(async () => {
    const moduleFixture = await Test.createTestingModule({
      providers: [SubscribeService],
      imports: [
        RabbitRetryModule.forRoot({
          url: uri,
          connectionInitOptions: { wait: true, reject: true, timeout: 3000 },
        }),
      ],
    }).compile();

    app = moduleFixture.createNestApplication();
    app.enableShutdownHooks();
    amqpConnection = app.get<AmqpConnection>(AmqpConnection);
    await app.init();
  });

  it('should wait for consumers to finish', async () => {
    await amqpConnection.publish('', routingKey1, 'testMessage');

    await new Promise((resolve) => setTimeout(resolve, 100));
    const closePromise = app.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(testHandler).not.toHaveBeenCalled();
    expect(await isFinished(closePromise)).toBeFalsy();
    subscriberResolve(true);
    await closePromise;
    expect(testHandler).toHaveBeenCalled();
  });
});
