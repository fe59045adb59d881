/*
 * Ported from nestjs/nest, integration/microservices/src/rmq/fanout-exchange-producer-rmq.controller.ts.
 * Copyright (c) 2017-present Kamil Mysliwiec, MIT License (see ../../LICENSE).
 * Changes from upstream: __test__/peers/CHANGES.md.
 */
import { Controller, Get } from '@nestjs/common';
import { ClientProxy } from '@nestjs/microservices';
import { lastValueFrom } from 'rxjs';

import { RabbitRetryClient } from '../../../../../lib/microservices';
import { AMQP_URL, FANOUT_EXCHANGE } from '../../broker';

@Controller()
export class RMQFanoutExchangeProducerController {
  client: ClientProxy;

  constructor() {
    this.client = new RabbitRetryClient({
      url: AMQP_URL,
      exchange: FANOUT_EXCHANGE,
    });
  }

  @Get('fanout-exchange')
  async topicExchange() {
    return lastValueFrom(this.client.send<string>('ping', 1));
  }
}
