// Ported from github.com/golevelup/nestjs (af1c8d7), integration/rabbitmq/e2e/rpc-no-direct-reply.e2e-spec.ts.
// (The MIT License) Copyright (c) 2019 Jesse Carter. Changes from upstream: __test__/peers/CHANGES.md.
import {
  AmqpConnection,
  RabbitRetryModule,
  RabbitRPC,
} from '../../../../lib/nestjs';
import { INestApplication, Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { getRabbitMQUri } from './utils';

const testHandler = jest.fn();

const prefix = 'testRpcNoDirectReply';
const exchange = prefix;
const routingKey = `${prefix}Route`;

@Injectable()
class RpcService {
  @RabbitRPC({
    exchange,
    routingKey: [routingKey],
    queue: `${prefix}Queue`,
  })
  handleSubscribe(message: object) {
    testHandler(message);
    return 'pong';
  }
}

describe('Rabbit Direct Reply To', () => {
  let app: INestApplication;
  let amqpConnection: AmqpConnection;

  const uri = getRabbitMQUri();

  beforeAll(async () => {
    const moduleFixture = await Test.createTestingModule({
      providers: [RpcService],
      imports: [
        RabbitRetryModule.forRoot({
          exchanges: [
            {
              name: exchange,
              type: 'topic',
            },
          ],
          url: uri,
          connectionInitOptions: { wait: true, reject: true, timeout: 3000 },
          enableDirectReplyTo: false,
        }),
      ],
    }).compile();

    app = moduleFixture.createNestApplication();
    amqpConnection = app.get<AmqpConnection>(AmqpConnection);
    await app.init();
  });

  afterAll(async () => {
    await app?.close();
  });

  it('should not receive subscribe messages because register handlers is disabled', async () => {
    await expect(
      amqpConnection.request({
        exchange,
        routingKey,
        payload: 'ping',
        timeout: 2000,
      }),
    ).rejects.toThrow();

    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(testHandler).not.toHaveBeenCalled();
  });
});
