/*
 * Ported from nestjs/nest, integration/microservices/e2e/sum-rmq.spec.ts.
 * Copyright (c) 2017-present Kamil Mysliwiec, MIT License (see LICENSE).
 * Changes from upstream: __test__/peers/CHANGES.md.
 */
import { INestApplication } from '@nestjs/common';
import { MicroserviceOptions } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { App } from 'supertest/types';
import { RabbitRetryServer } from '../../../lib/microservices';
import { AMQP_URL, QUEUE, removeTopology } from './broker';
import { RMQController } from './src/rmq/rmq.controller';

describe('RabbitMQ transport', () => {
  let server: App;
  let app: INestApplication;

  beforeEach(async () => {
    const module = await Test.createTestingModule({
      controllers: [RMQController],
    }).compile();

    app = module.createNestApplication();
    server = app.getHttpAdapter().getInstance();

    app.connectMicroservice<MicroserviceOptions>({
      strategy: new RabbitRetryServer({
        url: AMQP_URL,
        queue: QUEUE,
      }),
    });
    await app.startAllMicroservices();
    await app.init();
  });

  it(`/POST`, () => {
    return request(server).post('/?command=sum').send([1, 2, 3, 4, 5]).expect(200, '15');
  });

  it(`/POST (Promise/async)`, () => {
    return request(server).post('/?command=asyncSum').send([1, 2, 3, 4, 5]).expect(200).expect(200, '15');
  });

  it(`/POST (Observable stream)`, () => {
    return request(server).post('/?command=streamSum').send([1, 2, 3, 4, 5]).expect(200, '15');
  });

  it(`/POST (concurrent)`, () => {
    return request(server)
      .post('/concurrent')
      .send([
        Array.from({ length: 10 }, (v, k) => k + 1),
        Array.from({ length: 10 }, (v, k) => k + 11),
        Array.from({ length: 10 }, (v, k) => k + 21),
        Array.from({ length: 10 }, (v, k) => k + 31),
        Array.from({ length: 10 }, (v, k) => k + 41),
        Array.from({ length: 10 }, (v, k) => k + 51),
        Array.from({ length: 10 }, (v, k) => k + 61),
        Array.from({ length: 10 }, (v, k) => k + 71),
        Array.from({ length: 10 }, (v, k) => k + 81),
        Array.from({ length: 10 }, (v, k) => k + 91),
      ])
      .expect(200, 'true');
  });

  it(`/POST (streaming)`, () => {
    return request(server).post('/stream').send([1, 2, 3, 4, 5]).expect(200, '15');
  });

  it(`/POST (multiple-urls)`, () => {
    return request(server).post('/multiple-urls').send([1, 2, 3, 4, 5]).expect(200, '15');
  }, 10000);

  it(`/POST (event notification)`, (done) => {
    void request(server)
      .post('/notify')
      .send([1, 2, 3, 4, 5])
      .end(() => {
        setTimeout(() => {
          expect(RMQController.IS_NOTIFIED).toBe(true);
          done();
        }, 1000);
      });
  });

  it(`/POST (sending options with "RecordBuilder")`, () => {
    const payload = { items: [1, 2, 3] };
    return request(server)
      .post('/record-builder-duplex')
      .send(payload)
      .expect(200, {
        data: payload,
        headers: {
          ['x-version']: '1.0.0',
        },
        priority: 3,
      });
  });

  afterEach(async () => {
    // rabbit-retry: the controller's client is closed (Nest closes only clients it registered); Jest waits for it.
    await app.get(RMQController).client.close();
    await app.close();
  });

  afterAll(() => removeTopology([QUEUE]));
});
