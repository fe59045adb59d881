// Ported from github.com/golevelup/nestjs (af1c8d7), integration/rabbitmq/e2e/rmq-context.e2e-spec.ts.
// (The MIT License) Copyright (c) 2019 Jesse Carter. Changes from upstream: __test__/peers/CHANGES.md.
import {
  AmqpConnection,
  RabbitRetryModule,
  RabbitSubscribe,
} from '../../../../lib/nestjs';
import { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { INestApplication, Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { getRabbitMQUri } from './utils';

const validRmqTypeHandler = jest.fn();

const exchange = 'rmqContextExchange';
const queue = 'rmqContextQueue';

@Injectable()
class TestInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler<any>) {
    if ((context.getType() as string) !== 'rmq') {
      return next.handle();
    }

    validRmqTypeHandler('invoked');
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

describe('RMQ Context in Global interceptor', () => {
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
    await app.close();
  });

  it('should recognize as rmq context type and not the default (HTTP)', (done) => {
    amqpConnection.publish(exchange, 'x', `test-message`);
    expect.assertions(1);

    setTimeout(() => {
      expect(validRmqTypeHandler).toHaveBeenCalled();
      done();
    }, 100);
  });
});
