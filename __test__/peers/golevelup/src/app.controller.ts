// Ported from github.com/golevelup/nestjs (af1c8d7), integration/rabbitmq/src/app.controller.ts.
// (The MIT License) Copyright (c) 2019 Jesse Carter. Changes from upstream: __test__/peers/CHANGES.md.
import { AmqpConnection } from '../../../../lib/nestjs';
import { Controller, Get } from '@nestjs/common';

@Controller()
export class AppController {
  constructor(private readonly amqpConnection: AmqpConnection) {}

  @Get()
  getHello(): string {
    return 'Hello World!';
  }

  @Get('rpc')
  async getRpc() {
    return this.amqpConnection.request({
      exchange: 'exchange1',
      routingKey: 'rpc',
    });
  }
}
