/*
 * Ported from nestjs/nest, integration/microservices/e2e/disconnected-client.spec.ts (its RMQ case).
 * Copyright (c) 2017-present Kamil Mysliwiec, MIT License (see LICENSE).
 * Changes from upstream: __test__/peers/CHANGES.md.
 */
import { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { App } from 'supertest/types';
import { urlOnPort } from './broker';
import { DisconnectedClientController } from './src/disconnected.controller';

describe('Disconnected client', () => {
  let server: App;
  let app: INestApplication;

  beforeEach(async () => {
    const module = await Test.createTestingModule({
      controllers: [DisconnectedClientController],
    }).compile();

    app = module.createNestApplication();
    server = app.getHttpAdapter().getInstance();

    await app.init();
  });

  it(`RMQ`, () => {
    return request(server)
      .post('/')
      .send({
        url: urlOnPort(3333),
        queue: 'test',
      })
      .expect(408);
  });

  afterEach(async () => {
    await app.close();
  });
});
