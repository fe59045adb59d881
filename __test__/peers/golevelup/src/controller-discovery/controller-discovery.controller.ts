// Ported from github.com/golevelup/nestjs (af1c8d7), integration/rabbitmq/src/controller-discovery/controller-discovery.controller.ts.
// (The MIT License) Copyright (c) 2019 Jesse Carter. Changes from upstream: __test__/peers/CHANGES.md.
import {
  AmqpConnection,
  MessageHandlerErrorBehavior,
  RabbitPayload,
  RabbitRPC,
} from '../../../../../lib/nestjs';
import {
  Controller,
  Get,
  UseGuards,
  UseInterceptors,
  UsePipes,
} from '@nestjs/common';
import { ReplyErrorCallback } from '../rpc/reply.error.callback';
import { TransformInterceptor } from '../transform.interceptor';
import { RpcException } from '../rpc/rpc-exception';
import { DenyGuard } from '../deny.guard';
import { ValidationPipe } from '../validation.pipe';

@Controller('controller-discovery')
export class ControllerDiscoveryController {
  constructor(private readonly amqpConnection: AmqpConnection) {}

  @Get()
  getHello(): string {
    return 'Hello World!';
  }

  @Get('rpc')
  async getRpc() {
    return this.amqpConnection.request({
      exchange: 'exchange2',
      routingKey: 'rpc-2',
    });
  }

  @RabbitRPC({
    routingKey: 'rpc-2',
    exchange: 'exchange2',
    queue: 'rpc-2',
  })
  rpc(message: object) {
    return {
      echo: message,
    };
  }

  @RabbitRPC({
    routingKey: 'intercepted-rpc-2',
    exchange: 'exchange2',
    queue: 'intercepted-rpc-2',
  })
  @UseInterceptors(TransformInterceptor)
  interceptedRpc() {
    return {
      message: 42,
    };
  }

  @RabbitRPC({
    routingKey: 'piped-rpc-2',
    exchange: 'exchange2',
    queue: 'piped-rpc-2',
    errorBehavior: MessageHandlerErrorBehavior.ACK,
    errorHandler: ReplyErrorCallback,
  })
  @UsePipes(ValidationPipe)
  pipedRpc(@RabbitPayload() message: number) {
    return {
      message,
    };
  }

  @RabbitRPC({
    routingKey: 'piped-param-rpc-2',
    exchange: 'exchange2',
    queue: 'piped-param-rpc-2',
    errorBehavior: MessageHandlerErrorBehavior.ACK,
    errorHandler: ReplyErrorCallback,
  })
  pipedParamRpc(@RabbitPayload(ValidationPipe) message: number) {
    return {
      message,
    };
  }

  @RabbitRPC({
    routingKey: 'guarded-rpc-2',
    exchange: 'exchange2',
    queue: 'guarded-rpc-2',
    errorBehavior: MessageHandlerErrorBehavior.ACK,
    errorHandler: ReplyErrorCallback,
  })
  @UseGuards(DenyGuard)
  guardedRpc() {
    return {
      message: 'success',
    };
  }

  @RabbitRPC({
    routingKey: 'error-reply-rpc-2',
    exchange: 'exchange2',
    queue: 'error-reply-rpc-2',
    errorBehavior: MessageHandlerErrorBehavior.ACK,
    errorHandler: ReplyErrorCallback,
  })
  errorReplyRpc(message: object) {
    throw new RpcException(message);
  }

  @RabbitRPC({
    routingKey: 'non-json-rpc-2',
    exchange: 'exchange2',
    queue: 'non-json-rpc-2',
    allowNonJsonMessages: true,
  })
  nonJsonRpc(nonJsonMessage: any) {
    return {
      echo: nonJsonMessage,
    };
  }

  @RabbitRPC({
    routingKey: 'hash-wildcard-rpc.#',
    exchange: 'exchange2',
    queue: 'hash-wildcard-rpc-2',
    errorBehavior: MessageHandlerErrorBehavior.ACK,
    errorHandler: ReplyErrorCallback,
  })
  hashWildcardRpc() {
    return {
      message: 'success-hash-wildcard-rpc.#',
    };
  }

  @RabbitRPC({
    routingKey: 'star-wildcard-rpc.*.end',
    exchange: 'exchange2',
    queue: 'star-wildcard-rpc-2',
    errorBehavior: MessageHandlerErrorBehavior.ACK,
    errorHandler: ReplyErrorCallback,
  })
  wildcardRpc() {
    return {
      message: 'success-star-wildcard-rpc.*.end',
    };
  }
}
