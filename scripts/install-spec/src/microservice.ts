// The project's microservice, written for Transport.RMQ as Nest's documentation shows it,
// now started on rabbit-retry's transport: the handlers are unchanged.
import { Controller, type INestMicroservice, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, EventPattern, MessagePattern, Payload, RmqContext } from '@nestjs/microservices';
import { RabbitRetryExceptionFilter, RabbitRetryServer } from 'rabbit-retry/microservices';

export interface UserCreatedEvent {
  email: string;
}

/** What the handlers saw, for the e2e spec to read. */
export const seen = { created: [] as string[], patterns: [] as string[], attempts: [] as number[] };

@Controller()
export class MathController {
  @MessagePattern({ cmd: 'sum' })
  accumulate(data: number[]): number {
    return (data || []).reduce((a, b) => a + b);
  }

  @MessagePattern('notifications')
  getNotifications(@Payload() data: number[], @Ctx() context: RmqContext): number {
    seen.patterns.push(context.getPattern());
    const channel = context.getChannelRef() as { ack(message: unknown): void };
    const originalMsg = context.getMessage();
    channel.ack(originalMsg);
    return data.length;
  }

  @EventPattern('user_created')
  async handleUserCreated(data: UserCreatedEvent): Promise<void> {
    seen.created.push(data.email);
  }

  @EventPattern('user_deleted')
  async handleUserDeleted(data: { email: string; attempt?: number }): Promise<void> {
    throw new Error(`the directory is down (${data.email})`);
  }
}

@Module({ controllers: [MathController] })
export class MicroserviceModule {}

/** The microservice on rabbit-retry's transport, as main.ts starts it. */
export async function createMicroservice(url: string, queue: string): Promise<INestMicroservice> {
  const app = await NestFactory.createMicroservice(MicroserviceModule, {
    strategy: new RabbitRetryServer({ url, queue, prefetch: 10, onFailure: { delays: ['200ms', '400ms'] } }),
    logger: ['error'],
    abortOnError: false,
  });
  app.useGlobalFilters(new RabbitRetryExceptionFilter());
  return app;
}
