/*
 * Ported from nestjs/nest, integration/microservices/e2e/fanout-exchange-rmq.spec.ts.
 * Copyright (c) 2017-present Kamil Mysliwiec, MIT License (see LICENSE).
 * Changes from upstream: __test__/peers/CHANGES.md.
 */
import { INestApplication, INestMicroservice } from '@nestjs/common';
import { MicroserviceOptions } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { RabbitRetryServer } from '../../../lib/microservices';
import { AMQP_URL, FANOUT_EXCHANGE, removeTopology } from './broker';
import { RMQFanoutExchangeProducerController } from './src/rmq/fanout-exchange-producer-rmq.controller';
import { RMQFanoutExchangeConsumerController } from './src/rmq/fanout-exchange-consumer-rmq.controller';

describe('RabbitMQ transport (Fanout Exchange)', () => {
  let server: any;
  let appProducer: INestApplication;
  let appConsumer: INestMicroservice;

  beforeEach(async () => {
    const producerModule = await Test.createTestingModule({
      controllers: [RMQFanoutExchangeProducerController],
    }).compile();
    const consumerModule = await Test.createTestingModule({
      controllers: [RMQFanoutExchangeConsumerController],
    }).compile();

    appProducer = producerModule.createNestApplication();
    server = appProducer.getHttpAdapter().getInstance();

    appConsumer = consumerModule.createNestMicroservice<MicroserviceOptions>({
      strategy: new RabbitRetryServer({
        url: AMQP_URL,
        queue: '',
        exchange: FANOUT_EXCHANGE,
        exchangeType: 'fanout',
        queueOptions: {
          exclusive: true,
        },
      }),
    });
    await Promise.all([appProducer.init(), appConsumer.listen()]);
  });

  it(`should send message to fanout exchange`, async () => {
    await request(server).get('/fanout-exchange').expect(200, 'ping/pong');
  });

  afterEach(async () => {
    // rabbit-retry: the controller's client is closed (Nest closes only clients it registered); Jest waits for it.
    await appProducer.get(RMQFanoutExchangeProducerController).client.close();
    await Promise.all([appProducer.close(), appConsumer.close()]);
  });

  afterAll(() => removeTopology([], [FANOUT_EXCHANGE]));
});
