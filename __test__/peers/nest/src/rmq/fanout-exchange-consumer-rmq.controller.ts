/*
 * Ported from nestjs/nest, integration/microservices/src/rmq/fanout-exchange-consumer-rmq.controller.ts.
 * Copyright (c) 2017-present Kamil Mysliwiec, MIT License (see ../../LICENSE).
 * Unchanged from upstream.
 */
import { Controller } from '@nestjs/common';
import { Ctx, MessagePattern, RmqContext } from '@nestjs/microservices';

@Controller()
export class RMQFanoutExchangeConsumerController {
  constructor() {}

  @MessagePattern('ping')
  handleTopicExchange(@Ctx() ctx: RmqContext): string {
    return ctx.getPattern() + '/pong';
  }
}
