// Ported from github.com/golevelup/nestjs (af1c8d7), integration/rabbitmq/e2e/execution-context.e2e-spec.ts.
// (The MIT License) Copyright (c) 2019 Jesse Carter. Changes from upstream: __test__/peers/CHANGES.md.
import {
  AmqpConnection,
  isRabbitContext,
  RabbitRetryModule,
  RabbitSubscribe,
} from '../../../../lib/nestjs';
import { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { INestApplication, Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { getRabbitMQUri } from './utils';

const interceptorHandler = jest.fn();

const exchange = 'executionContextExchange';
const queue = 'executionContextQueue';

@Injectable()
class TestInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler<any>) {
    const shouldSkip = isRabbitContext(context);
    if (shouldSkip) {
      return next.handle();
    }

    interceptorHandler('invoked');
    return next.handle();
  }
}

@Injectable()
class SubscribeService {
  @RabbitSubscribe({
    exchange,
    routingKey: '#',
    queue,
  })
  handleSubscribe(message: object) {
    console.log(`RECEIVED MESSAGE: ${message}`);
  }
}

describe('Rabbit Subscribe Without Register Handlers', () => {
  let app: INestApplication;
  let amqpConnection: AmqpConnection;

  const uri = getRabbitMQUri();

  beforeAll(async () => {
    const moduleFixture = await Test.createTestingModule({
      providers: [SubscribeService, TestInterceptor],
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
        }),
      ],
    }).compile();

    app = moduleFixture.createNestApplication();
    amqpConnection = app.get<AmqpConnection>(AmqpConnection);
    app.useGlobalInterceptors(new TestInterceptor());
    await app.init();
  });

  afterAll(async () => {
    await app?.close();
  });

  it('should recognize a rabbit handler execution context and allow for interceptors to be skipped', async () => {
    await amqpConnection.publish(exchange, 'x', `test-message`);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(interceptorHandler).not.toHaveBeenCalled();
  });
});
