/*
 * Ported from nestjs/nest, integration/microservices/e2e/topic-exchange-rmq.spec.ts.
 * Copyright (c) 2017-present Kamil Mysliwiec, MIT License (see LICENSE).
 * Changes from upstream: __test__/peers/CHANGES.md.
 */
import { INestApplication } from '@nestjs/common';
import { MicroserviceOptions } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { RabbitRetryServer } from '../../../lib/microservices';
import { AMQP_URL, QUEUE2, removeTopology } from './broker';
import { RMQTopicExchangeController } from './src/rmq/topic-exchange-rmq.controller';

describe('RabbitMQ transport (Topic Exchange - wildcards)', () => {
  let server: any;
  let app: INestApplication;

  beforeEach(async () => {
    const module = await Test.createTestingModule({
      controllers: [RMQTopicExchangeController],
    }).compile();

    app = module.createNestApplication();
    server = app.getHttpAdapter().getInstance();

    app.connectMicroservice<MicroserviceOptions>({
      strategy: new RabbitRetryServer({
        url: AMQP_URL,
        queue: QUEUE2,
        wildcards: true,
      }),
    });
    await app.startAllMicroservices();
    await app.init();
  });

  it(`should send message to wildcard topic exchange`, () => {
    return request(server).get('/topic-exchange').expect(200, 'wildcard.a.b');
  });

  afterEach(async () => {
    // rabbit-retry: the controller's client is closed (Nest closes only clients it registered); Jest waits for it.
    await app.get(RMQTopicExchangeController).client.close();
    await app.close();
  });

  afterAll(() => removeTopology([QUEUE2], [QUEUE2]));
});
