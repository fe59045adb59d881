/*
 * Ported from nestjs/nest, integration/microservices/src/rmq/topic-exchange-rmq.controller.ts.
 * Copyright (c) 2017-present Kamil Mysliwiec, MIT License (see ../../LICENSE).
 * Changes from upstream: __test__/peers/CHANGES.md.
 */
import { Controller, Get } from '@nestjs/common';
import { ClientProxy, Ctx, MessagePattern, RmqContext } from '@nestjs/microservices';
import { lastValueFrom } from 'rxjs';

import { RabbitRetryClient } from '../../../../../lib/microservices';
import { AMQP_URL, QUEUE2 } from '../../broker';

@Controller()
export class RMQTopicExchangeController {
  client: ClientProxy;

  constructor() {
    this.client = new RabbitRetryClient({
      url: AMQP_URL,
      queue: QUEUE2,
      wildcards: true,
    });
  }

  @Get('topic-exchange')
  async topicExchange() {
    return lastValueFrom(this.client.send<string>('wildcard.a.b', 1));
  }

  @MessagePattern('wildcard.*.*')
  handleTopicExchange(@Ctx() ctx: RmqContext): string {
    return ctx.getPattern();
  }
}
